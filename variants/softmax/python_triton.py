"""Softmax over rows as Triton's tutorial writes it (python/tutorials/02-fused-softmax.py): a program per row, the
whole row in registers (BLOCK a power of two >= cols, masked with -inf), max, exp, sum and divide without leaving
the chip: the matrix read once and written once. The warps grow with the row, as the tutorial's heuristic does.
A row wider than 32,768 floats would spill; those rows take a two-pass online variant (max and sum in one sweep,
then the normalised write), kernel `softmax_online`."""

from kstudy_py.rungs import rung


@rung(operation="softmax", framework="triton", fusion="full", kernels=1,
      description="Triton: the tutorial's fused softmax (a program per row, the row in registers); rows over 32,768 "
                  "columns by an online two-sweep kernel")
def softmax_triton(triton):
    import torch
    import triton.language as tl

    @triton.jit
    def softmax_row(y_ptr, x_ptr, cols, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        c = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * cols + c, mask=c < cols, other=-float("inf"))
        e = tl.exp(x - tl.max(x, axis=0))
        tl.store(y_ptr + row * cols + c, e / tl.sum(e, axis=0), mask=c < cols)

    @triton.jit
    def softmax_online(y_ptr, x_ptr, cols, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        m = tl.full([BLOCK], -float("inf"), tl.float32)
        s = tl.zeros([BLOCK], tl.float32)
        for c0 in range(0, cols, BLOCK):
            c = c0 + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + row * cols + c, mask=c < cols, other=-float("inf"))
            m_new = tl.maximum(m, x)
            s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
            s = tl.where(m_new == -float("inf"), 0.0, s)
            m = m_new
        row_max = tl.max(m, axis=0)
        row_sum = tl.sum(s * tl.exp(m - row_max), axis=0)
        for c0 in range(0, cols, BLOCK):
            c = c0 + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + row * cols + c, mask=c < cols, other=-float("inf"))
            tl.store(y_ptr + row * cols + c, tl.exp(x - row_max) / row_sum, mask=c < cols)

    config = {}

    def run(x):
        rows, cols = x.shape
        y = torch.empty_like(x)
        block = triton.next_power_of_2(cols)
        if block <= 32768:
            warps = 4 if block < 2048 else (8 if block < 4096 else 16)
            softmax_row[(rows,)](y, x, cols, BLOCK=block, num_warps=warps)
        else:
            block, warps = 4096, 8
            softmax_online[(rows,)](y, x, cols, BLOCK=block, num_warps=warps)
        config.update(block=block, num_warps=warps)
        return y

    run.kstudy_config = config
    return run
