"""The sum of n floats as NumPy, PyTorch and CuPy users write it: x.sum(), NumPy's pairwise summation in float32,
PyTorch's and CuPy's CUDA reduction kernels with float32 accumulation; one body serves all three (registered beside
each other, so they cannot drift apart), and the float32 result is widened to the operation's float64 s by the
worker. At a few thousand elements the kernel takes microseconds, so these rungs also measure what a framework's
call costs around its kernel in a kstudy study (alternatives_reduce at n = 1,024)."""

from kstudy_py.rungs import rung


def _sum(xp):
    def run(x):
        return x.sum()

    return run


@rung(operation="reduce_sum", framework="numpy", fusion="full", kernels=1,
      description="NumPy: x.sum() (pairwise summation in float32)")
def reduce_sum_numpy(np):
    return _sum(np)


@rung(operation="reduce_sum", framework="torch", fusion="full", kernels=1,
      description="PyTorch: x.sum() (its CUDA reduction kernel, float32 accumulation)")
def reduce_sum_torch(torch):
    return _sum(torch)


@rung(operation="reduce_sum", framework="cupy", fusion="full", kernels=1,
      description="CuPy: x.sum() (its CUDA reduction kernel, float32 accumulation)")
def reduce_sum_cupy(cupy):
    return _sum(cupy)
