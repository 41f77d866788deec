"""Softmax over rows in PyTorch: the library call a PyTorch user makes (torch.softmax, PyTorch's own fused CUDA
kernel: the vendor-style alternative to kstudy's cuDNN variant, called as PyTorch calls it) and the composed
expression through torch.compile (Inductor writes its own Triton softmax kernel; compiled at the gate's run)."""

from kstudy_py.rungs import rung


@rung(operation="softmax", framework="torch", fusion="full", kernels=1,
      description="PyTorch's library softmax: torch.softmax(x, dim=1), its own fused CUDA kernel")
def softmax_torch(torch):
    def run(x):
        return torch.softmax(x, dim=1)

    return run


@rung(operation="softmax", framework="torch", family="torch_compile", fusion="full", kernels=1,
      description="torch.compile (Inductor, default mode) of exp(x - max) / sum written out: its Triton kernel")
def softmax_torch_compile(torch):
    def softmax(x):
        e = torch.exp(x - x.amax(dim=1, keepdim=True))
        return e / e.sum(dim=1, keepdim=True)

    return torch.compile(softmax, dynamic=False)
