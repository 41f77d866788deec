"""The sum of n floats as NumPy, PyTorch and CuPy users write it: x.sum(), NumPy's pairwise summation in float32,
PyTorch's and CuPy's CUDA reduction kernels with float32 accumulation; one body serves all three (registered beside
each other, so they cannot drift apart), and the float32 result is widened to the operation's float64 s by the
worker. At a few thousand elements the kernel takes microseconds, so these rungs also measure what a framework's
call costs around its kernel in a kstudy study (alternatives_reduce at n = 1,024)."""

from kstudy_py.rungs import rungs


@rungs(operation="reduce_sum", fusion="full", kernels=1, frameworks={
    "numpy": "NumPy: x.sum() (pairwise summation in float32)",
    "torch": "PyTorch: x.sum() (its CUDA reduction kernel, float32 accumulation)",
    "cupy": "CuPy: x.sum() (its CUDA reduction kernel, float32 accumulation)",
})
def _sum(xp):
    def run(x):
        return x.sum()

    return run
