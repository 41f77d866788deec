"""GEMM in NumPy: `a @ b` on float32 arrays, NumPy's BLAS (OpenBLAS in Debian's and the wheels' builds) with the
threads its environment gives it (OMP_NUM_THREADS / OPENBLAS_NUM_THREADS, set by kstudy's protocol for its host
variants too): the host alternative to kstudy's Kokkos Kernels rung. The float32 operation only (NumPy has no
TF32 and no bfloat16; its float16 product is computed in float16, not the float32 the operation asks for).
Row-major (NumPy's own order); feature-major points skip it."""

from kstudy_py.rungs import rung


@rung(operation="gemm", framework="numpy", fusion="full", kernels=1,
      description="NumPy: a @ b on float32 arrays (NumPy's BLAS sgemm)")
def gemm_numpy(np):
    def run(a, b):
        return a @ b

    return run
