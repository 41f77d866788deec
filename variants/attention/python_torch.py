"""Attention as PyTorch users call it: torch.nn.functional.scaled_dot_product_attention on (1, heads, tokens,
head_dim) views of kstudy's Q, K, V, is_causal for the causal operations, the default scale 1/sqrt(head_dim) as
kstudy's. `*_torch_sdpa` lets PyTorch pick the kernel, as a user gets it; the 16-bit operations also get one rung per
backend PyTorch offers on Hopper (torch.nn.attention.sdpa_kernel: cuDNN's fused attention, FlashAttention-2), and
float32 its memory-efficient kernel, so the archive says which library kernel is fastest as PyTorch calls it, beside
kstudy's own cuDNN call and its rungs. A backend that cannot take a point says so in the rung's failure."""

from kstudy_py.rungs import rung

# Backends per operation precision: (name suffix, SDPBackend member, what it is).
_BACKENDS = {
    "16": (("cudnn", "CUDNN_ATTENTION", "cuDNN's fused attention"), ("flash", "FLASH_ATTENTION", "FlashAttention-2")),
    "32": (("efficient", "EFFICIENT_ATTENTION", "its memory-efficient kernel"),),
}


def _builder(operation, causal, backend):
    def build(torch):
        sdpa = torch.nn.functional.scaled_dot_product_attention
        if backend is None:
            def run(q, k, v):
                return sdpa(q[None], k[None], v[None], is_causal=causal)[0]
            return run
        from torch.nn.attention import SDPBackend, sdpa_kernel

        chosen = getattr(SDPBackend, backend)

        def run(q, k, v):
            with sdpa_kernel(chosen):
                return sdpa(q[None], k[None], v[None], is_causal=causal)[0]

        return run

    return build


for _precision in ("", "_bf16", "_fp16"):
    for _mask in ("", "_causal"):
        _operation = f"attention{_precision}{_mask}"
        _causal = bool(_mask)
        _build = _builder(_operation, _causal, None)
        rung(operation=_operation, framework="torch", name=f"{_operation}_torch_sdpa", fusion="full", kernels=1,
             description="PyTorch scaled_dot_product_attention" + (", is_causal" if _causal else "") +
                         " (PyTorch picks FlashAttention, cuDNN or its memory-efficient kernel)")(_build)
        for _suffix, _member, _what in _BACKENDS["16" if _precision else "32"]:
            _build = _builder(_operation, _causal, _member)
            rung(operation=_operation, framework="torch", name=f"{_operation}_torch_sdpa_{_suffix}", fusion="full",
                 kernels=1, description=f"PyTorch scaled_dot_product_attention held to {_what} (sdpa_kernel)" +
                                        (", is_causal" if _causal else ""))(_build)
