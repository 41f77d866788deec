"""The sum of n floats in NumPy as its users write it: x.sum(), NumPy's pairwise summation in float32; the float32
result is widened to the operation's float64 s by the worker."""

from kstudy_py.rungs import rung


@rung(operation="reduce_sum", framework="numpy", fusion="full", kernels=1,
      description="NumPy: x.sum() (pairwise summation in float32)")
def reduce_sum_numpy(np):
    def run(x):
        return x.sum()

    return run
