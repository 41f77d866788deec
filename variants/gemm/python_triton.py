"""GEMM in Triton as its tutorial writes it (python/tutorials/03-matrix-multiplication.py): one program per C tile in
grouped order (GROUP_M tile rows walked together, for L2 reuse), tl.dot over BLOCK_K slices with a float32
accumulator, autotuned by Triton over the tutorial's configurations at the first call (the gate's run, untimed); the
configuration it chose is archived. C is stored in float32, as kstudy's operations define it. Registered for the
tensor-core operations: bf16 and fp16 inputs, and float32 inputs multiplied as TF32 (tl.dot's input_precision
"tf32"). Row-major."""

from kstudy_py.rungs import rung

_CONFIGS = (  # (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_stages, num_warps): the tutorial's CUDA list
    (128, 256, 64, 8, 3, 8), (64, 256, 32, 8, 4, 4), (128, 128, 32, 8, 4, 4), (128, 64, 32, 8, 4, 4),
    (64, 128, 32, 8, 4, 4), (128, 32, 32, 8, 4, 4), (64, 32, 32, 8, 5, 2), (32, 64, 32, 8, 5, 2),
)


def _builder(operation):
    def build(triton):
        import torch
        import triton.language as tl

        configs = [triton.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": g}, num_stages=s, num_warps=w)
                   for m, n, k, g, s, w in _CONFIGS]
        tf32 = operation == "gemm_tf32"  # 16-bit inputs take tl.dot's default: their products are exact

        @triton.autotune(configs=configs, key=["M", "N", "K"])
        @triton.jit
        def matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                   TF32: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   GROUP_M: tl.constexpr):
            pid = tl.program_id(0)
            tiles_m = tl.cdiv(M, BLOCK_M)
            tiles_n = tl.cdiv(N, BLOCK_N)
            in_group = GROUP_M * tiles_n
            first_m = (pid // in_group) * GROUP_M
            group_m = min(tiles_m - first_m, GROUP_M)
            pid_m = first_m + ((pid % in_group) % group_m)
            pid_n = (pid % in_group) // group_m
            rows = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M  # wrapped: the overhang re-reads valid rows
            cols = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
            ks = tl.arange(0, BLOCK_K)
            a_ptrs = a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak
            b_ptrs = b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for k in range(0, tl.cdiv(K, BLOCK_K)):
                a = tl.load(a_ptrs, mask=ks[None, :] < K - k * BLOCK_K, other=0.0)
                b = tl.load(b_ptrs, mask=ks[:, None] < K - k * BLOCK_K, other=0.0)
                if TF32:
                    acc = tl.dot(a, b, acc, input_precision="tf32")
                else:
                    acc = tl.dot(a, b, acc)
                a_ptrs += BLOCK_K * stride_ak
                b_ptrs += BLOCK_K * stride_bk
            out_rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
            out_cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
            c_ptrs = c_ptr + out_rows[:, None] * stride_cm + out_cols[None, :] * stride_cn
            tl.store(c_ptrs, acc, mask=(out_rows[:, None] < M) & (out_cols[None, :] < N))

        config = {}

        def run(a, b):
            m, k = a.shape
            n = b.shape[1]
            c = torch.empty((m, n), dtype=torch.float32, device=a.device)
            grid = lambda meta: (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)  # noqa: E731
            matmul[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                         c.stride(1), TF32=tf32)
            best = getattr(matmul, "best_config", None)
            if best is not None and not config:
                config.update({key.lower(): value for key, value in best.kwargs.items()},
                              num_stages=best.num_stages, num_warps=best.num_warps)
            return c

        run.kstudy_config = config
        return run

    build.__name__ = f"{operation}_triton"
    return build


for _operation, _inputs in (("gemm_tf32", "float32 multiplied as TF32"), ("gemm_bf16", "bfloat16"),
                            ("gemm_fp16", "float16")):
    rung(operation=_operation, framework="triton", fusion="full", kernels=1,
         description=f"Triton: the tutorial's matmul ({_inputs} tl.dot, float32 accumulator and C, grouped tiles), "
                     "autotuned over its 8 configurations at the first call")(_builder(_operation))
