"""Attention in NumPy as a NumPy user writes it, per head: scores = q k^T / sqrt(head_dim) (BLAS), the causal mask
as -inf above the diagonal, a stable softmax over each query's row, and the product with v (BLAS). Every head's
tokens x tokens score matrix is materialised (64 MiB at 4,096 tokens): the textbook formulation a fused kernel
avoids. float32 only (NumPy has no bfloat16; its float16 products are not the operation's float32 ones)."""

from kstudy_py.rungs import rung


def _builder(causal):
    def build(np):
        def run(q, k, v):
            heads, tokens, head_dim = q.shape
            scale = np.float32(1.0 / np.sqrt(head_dim))
            o = np.empty_like(q)
            above = np.triu(np.ones((tokens, tokens), dtype=bool), 1) if causal else None
            for h in range(heads):
                s = (q[h] @ k[h].T) * scale
                if causal:
                    s[above] = -np.inf
                s = np.exp(s - s.max(axis=1, keepdims=True))
                s /= s.sum(axis=1, keepdims=True)
                o[h] = s @ v[h]
            return o

        return run

    return build


for _operation, _causal in (("attention", False), ("attention_causal", True)):
    rung(operation=_operation, framework="numpy", name=f"{_operation}_numpy", fusion="none", kernels=4,
         description="NumPy: per head, q k^T / sqrt(d) (BLAS), " + ("the causal mask, " if _causal else "") +
                     "a stable row softmax, then times v (BLAS); the score matrix materialised")(_builder(_causal))
