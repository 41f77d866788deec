"""Softmax over rows as a NumPy user writes it (and as SciPy's scipy.special.softmax does): the row max subtracted
for stability, exp, and the division by the row sum; three passes with two rows x cols temporaries. The same array
code on cupy arrays is composed CuPy (four kernels, the temporaries in device memory), registered here too, so the
two rungs cannot drift apart."""

from kstudy_py.rungs import rungs


@rungs(operation="softmax", fusion="none", kernels=4, frameworks={
    "numpy": "NumPy: exp(x - row max) / row sum as array expressions (max, exp, sum, divide)",
    "cupy": "composed CuPy: the NumPy rung's array expressions on cupy arrays (max, subtract and exp, sum, divide)",
})
def _composed(xp):
    def run(x):
        e = xp.exp(x - x.max(axis=1, keepdims=True))
        e /= e.sum(axis=1, keepdims=True)
        return e

    return run
