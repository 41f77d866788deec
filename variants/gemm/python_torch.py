"""GEMM as PyTorch calls cuBLAS: torch.mm on resident tensors, at each of kstudy's four GEMM operations, so that
"the vendor library called as PyTorch calls it" stands in the same archive, under the same gate, as kstudy's own
cuBLAS call and its kernel ladder.
  gemm        float32, torch.set_float32_matmul_precision("highest"): cuBLAS SGEMM, no TF32
  gemm_tf32   float32, precision "high": PyTorch lets cuBLAS use TF32 tensor cores
  gemm_bf16   bfloat16 inputs, C float32: torch.mm(a, b, out_dtype=torch.float32) (PyTorch 2.8+), the fp32-output
  gemm_fp16   float16 inputs, C float32:   cuBLAS GEMM kstudy's operations define (a bf16 C would fail their gate)
Row-major only (torch's own layout); feature-major points skip these rungs."""

from kstudy_py.rungs import rung
from kstudy_py.rungs.frameworks import Unavailable

_PRECISION = {"gemm": "highest", "gemm_tf32": "high"}


def _builder(operation):
    def build(torch):
        if operation in _PRECISION:
            torch.set_float32_matmul_precision(_PRECISION[operation])

            def run(a, b):
                return torch.mm(a, b)

            return run
        probe = torch.ones((16, 16), dtype=torch.float16, device="cuda")
        try:
            torch.mm(probe, probe, out_dtype=torch.float32)
        except TypeError as exc:
            raise Unavailable(f"torch {torch.__version__} has no torch.mm(..., out_dtype=float32): {exc}") from exc

        def run(a, b):
            return torch.mm(a, b, out_dtype=torch.float32)

        return run

    build.__name__ = f"{operation}_torch"
    return build


for _operation, _how in (("gemm", "float32 SGEMM (matmul precision 'highest')"),
                         ("gemm_tf32", "TF32 (matmul precision 'high')"),
                         ("gemm_bf16", "bfloat16 inputs, float32 output (out_dtype)"),
                         ("gemm_fp16", "float16 inputs, float32 output (out_dtype)")):
    rung(operation=_operation, framework="torch", fusion="full", kernels=1,
         description=f"PyTorch torch.mm through cuBLAS, {_how}")(_builder(_operation))
