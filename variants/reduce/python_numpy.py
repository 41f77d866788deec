"""The sum of n floats as NumPy and PyTorch users write it: x.sum(), NumPy's pairwise summation in float32 and
PyTorch's CUDA reduction kernel with float32 accumulation; one body serves both (registered beside each other, so the
two cannot drift apart), and the float32 result is widened to the operation's float64 s by the worker."""

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
