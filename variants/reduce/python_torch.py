"""The sum of n floats in PyTorch as its users write it: x.sum(), its CUDA reduction kernel with float32
accumulation; the float32 result is widened to the operation's float64 s by the worker."""

from kstudy_py.rungs import rung


@rung(operation="reduce_sum", framework="torch", fusion="full", kernels=1,
      description="PyTorch: x.sum() (its CUDA reduction kernel, float32 accumulation)")
def reduce_sum_torch(torch):
    def run(x):
        return x.sum()

    return run
