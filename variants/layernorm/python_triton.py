"""LayerNorm as Triton's tutorial writes its forward kernel (python/tutorials/05-layer-norm.py): a program per row,
the row walked in BLOCK-wide tiles three times (mean, variance, normalise and store), float32 throughout, eps 1e-5;
for residual + LayerNorm the add is fused into the first sweep, h stored there and re-read by the later sweeps
(as the tutorial re-reads x). The tile and warps follow the tutorial's heuristic: BLOCK the row's power of two up
to 64 KB of floats, warps BLOCK / 256 between 1 and 8."""

from kstudy_py.rungs import rung


def _builder(residual):
    def build(triton):
        import torch
        import triton.language as tl

        @triton.jit
        def layer_norm_row(y_ptr, h_ptr, x_ptr, r_ptr, gamma_ptr, beta_ptr, hidden, eps, RESIDUAL: tl.constexpr,
                           BLOCK: tl.constexpr):
            row = tl.program_id(0).to(tl.int64) * hidden
            acc = tl.zeros([BLOCK], dtype=tl.float32)
            for c0 in range(0, hidden, BLOCK):
                c = c0 + tl.arange(0, BLOCK)
                v = tl.load(x_ptr + row + c, mask=c < hidden, other=0.0)
                if RESIDUAL:
                    v += tl.load(r_ptr + row + c, mask=c < hidden, other=0.0)
                    tl.store(h_ptr + row + c, v, mask=c < hidden)
                acc += v
            mean = tl.sum(acc, axis=0) / hidden
            src = h_ptr if RESIDUAL else x_ptr
            acc = tl.zeros([BLOCK], dtype=tl.float32)
            for c0 in range(0, hidden, BLOCK):
                c = c0 + tl.arange(0, BLOCK)
                v = tl.load(src + row + c, mask=c < hidden, other=0.0)
                d = tl.where(c < hidden, v - mean, 0.0)
                acc += d * d
            inv_std = 1 / tl.sqrt(tl.sum(acc, axis=0) / hidden + eps)
            for c0 in range(0, hidden, BLOCK):
                c = c0 + tl.arange(0, BLOCK)
                v = tl.load(src + row + c, mask=c < hidden, other=0.0)
                g = tl.load(gamma_ptr + c, mask=c < hidden, other=0.0)
                b = tl.load(beta_ptr + c, mask=c < hidden, other=0.0)
                tl.store(y_ptr + row + c, (v - mean) * inv_std * g + b, mask=c < hidden)

        config = {}

        def launch(x, r, gamma, beta):
            rows, hidden = x.shape
            block = min(65536 // 4, triton.next_power_of_2(hidden))
            warps = min(max(block // 256, 1), 8)
            config.update(block=block, num_warps=warps)
            y = torch.empty_like(x)
            h = torch.empty_like(x) if residual else y
            layer_norm_row[(rows,)](y, h, x, r if residual else x, gamma, beta, hidden, 1e-5, RESIDUAL=residual,
                                    BLOCK=block, num_warps=warps)
            return (y, h) if residual else y

        if residual:
            def run(x, r, gamma, beta):
                return launch(x, r, gamma, beta)
        else:
            def run(x, gamma, beta):
                return launch(x, None, gamma, beta)
        run.kstudy_config = config
        return run

    return build


for _operation, _residual in (("layernorm", False), ("residual_layernorm", True)):
    rung(operation=_operation, framework="triton", name=f"{_operation}_triton", fusion="full", kernels=1,
         description="Triton: the tutorial's LayerNorm forward, a program per row, three sweeps of BLOCK-wide tiles" +
                     (" (the add fused into the first, h stored there)" if _residual else ""))(_builder(_residual))
