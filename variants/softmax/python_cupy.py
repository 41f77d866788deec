"""Softmax over rows in CuPy, composed as the NumPy rung is (max, subtract and exp, sum, divide: four kernels, two
rows x cols temporaries in device memory)."""

from kstudy_py.rungs import rung


@rung(operation="softmax", framework="cupy", fusion="none", kernels=4,
      description="composed CuPy: exp(x - row max) / row sum as array expressions on cupy arrays")
def softmax_cupy(cp):
    def run(x):
        e = cp.exp(x - x.max(axis=1, keepdims=True))
        e /= e.sum(axis=1, keepdims=True)
        return e

    return run
