import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


@jax.jit
def f():
    k = jnp.asarray(np.array([1.5, -2.5], jnp.float8_e3m4))
    r = lax.round(k, lax.RoundingMethod.AWAY_FROM_ZERO)
    return r

result = f()
print(result)
