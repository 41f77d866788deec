"""Attention as PyTorch users call it: torch.nn.functional.scaled_dot_product_attention on (1, heads, tokens,
head_dim) views of kstudy's Q, K, V, is_causal for the causal operations, the default scale 1/sqrt(head_dim) as
kstudy's. PyTorch picks the kernel (FlashAttention-2 or cuDNN's for bfloat16 and float16 on Hopper, its
memory-efficient kernel for float32): the library choice a user gets, beside kstudy's rungs and its own cuDNN
call, in the same archive under the same gate."""

from kstudy_py.rungs import rung


def _builder(operation, causal):
    def build(torch):
        sdpa = torch.nn.functional.scaled_dot_product_attention

        def run(q, k, v):
            return sdpa(q[None], k[None], v[None], is_causal=causal)[0]

        return run

    build.__name__ = f"{operation}_torch_sdpa"
    return build


for _precision in ("", "_bf16", "_fp16"):
    for _mask in ("", "_causal"):
        _operation = f"attention{_precision}{_mask}"
        rung(operation=_operation, framework="torch", fusion="full", kernels=1,
             description="PyTorch scaled_dot_product_attention" + (", is_causal" if _mask else "") +
                         " (PyTorch picks FlashAttention, cuDNN or its memory-efficient kernel)")(
            _builder(_operation, bool(_mask)))
