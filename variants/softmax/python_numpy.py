"""Softmax over rows in NumPy, as a NumPy user writes it (and as SciPy's scipy.special.softmax does): the row max
subtracted for stability, exp, and the division by the row sum; three passes with two rows x cols temporaries."""

from kstudy_py.rungs import rung


@rung(operation="softmax", framework="numpy", fusion="none", kernels=4,
      description="NumPy: exp(x - row max) / row sum as array expressions (max, exp, sum, divide)")
def softmax_numpy(np):
    def run(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        e /= e.sum(axis=1, keepdims=True)
        return e

    return run
