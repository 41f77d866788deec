"""Softmax over rows in JAX: the library call a JAX user makes, jax.nn.softmax under jax.jit (XLA's fused
reductions), compiled at the gate's run."""

from kstudy_py.rungs import rung


@rung(operation="softmax", framework="jax", fusion="full", kernels=2,
      description="JAX: jax.nn.softmax(x, axis=1) under jax.jit, timed by block_until_ready")
def softmax_jax(jax):
    return jax.jit(lambda x: jax.nn.softmax(x, axis=1))
