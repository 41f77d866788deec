"""The scoring operation in JAX as a JAX user writes it: the NumPy code in jax.numpy under jax.jit, which fuses the
elementwise steps with the row score (written as a sum). jnp.clip keeps NaN, so NaN in x gives a NaN score and flag
0. Compiled at the first call, the gate's run; clip and threshold are traced arguments, so one compilation serves
every call of a point."""

from kstudy_py.rungs import rung


@rung(operation="scoring", framework="jax", fusion="full", kernels=2,
      description="JAX: the NumPy code in jax.numpy under jax.jit (XLA's fusion), timed by block_until_ready")
def scoring_jax(jax):
    import jax.numpy as jnp

    @jax.jit
    def score_rows(x, mean, inv_std, weight, clip, threshold):
        z = jnp.clip((x[:, :mean.shape[0]] - mean) * inv_std, -clip, clip)
        score = jnp.sum(z * weight, axis=1)  # not z @ weight: XLA's default float32 dot on Ampere+ is TF32
        flag = score > threshold
        return score, flag.astype(jnp.uint8), jnp.count_nonzero(flag)

    def run(x, mean, inv_std, weight, clip, threshold):
        return score_rows(x, mean, inv_std, weight, clip, threshold)

    return run
