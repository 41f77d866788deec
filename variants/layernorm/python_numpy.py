"""LayerNorm (and residual + LayerNorm) over rows in NumPy, as a NumPy user writes it: the row mean, the biased
variance of the centred rows, the normalised rows times gamma plus beta, eps = 1e-5 as PyTorch's default; each step
an array expression with its rows x hidden temporary."""

from kstudy_py.rungs import rung


def _normalise(np, h, gamma, beta):
    centred = h - h.mean(axis=1, keepdims=True)
    inv_std = 1.0 / np.sqrt((centred * centred).mean(axis=1, keepdims=True) + np.float32(1e-5))
    return centred * inv_std * gamma + beta


@rung(operation="layernorm", framework="numpy", fusion="none", kernels=6,
      description="NumPy: mean, centre, variance, normalise, scale and shift as array expressions")
def layernorm_numpy(np):
    def run(x, gamma, beta):
        return _normalise(np, x, gamma, beta)

    return run


@rung(operation="residual_layernorm", framework="numpy", fusion="none", kernels=7,
      description="NumPy: h = x + r, then the LayerNorm rung's array expressions on h; returns y and h")
def residual_layernorm_numpy(np):
    def run(x, r, gamma, beta):
        h = x + r
        return _normalise(np, h, gamma, beta), h

    return run
