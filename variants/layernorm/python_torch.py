"""LayerNorm as PyTorch users call it: torch.nn.functional.layer_norm (PyTorch's own fused kernel; eps 1e-5, the
operation's), for residual + LayerNorm after the add, as a transformer block writes it; and the residual block
through torch.compile, which fuses the add into the normalisation (Inductor's Triton kernel)."""

from kstudy_py.rungs import rung


@rung(operation="layernorm", framework="torch", fusion="full", kernels=1,
      description="PyTorch's library LayerNorm: F.layer_norm(x, (hidden,), gamma, beta, 1e-5)")
def layernorm_torch(torch):
    layer_norm = torch.nn.functional.layer_norm

    def run(x, gamma, beta):
        return layer_norm(x, (x.shape[1],), gamma, beta, 1e-5)

    return run


def _residual(torch):
    layer_norm = torch.nn.functional.layer_norm

    def run(x, r, gamma, beta):
        h = x + r
        return layer_norm(h, (h.shape[1],), gamma, beta, 1e-5), h

    return run


@rung(operation="residual_layernorm", framework="torch", fusion="partial", kernels=2,
      description="PyTorch eager: h = x + r, then F.layer_norm (two kernels; h written and read back)")
def residual_layernorm_torch(torch):
    return _residual(torch)


@rung(operation="residual_layernorm", framework="torch", family="torch_compile", fusion="full", kernels=1,
      description="torch.compile (Inductor, default mode) of the eager add + F.layer_norm: the add fused in")
def residual_layernorm_torch_compile(torch):
    return torch.compile(_residual(torch), dynamic=False)
