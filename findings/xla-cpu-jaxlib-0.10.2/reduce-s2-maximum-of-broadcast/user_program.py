import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


@jax.jit
def f(p_1):
    broadcast_7 = lax.broadcast_in_dim(p_1, (3, 3), ())
    constant_12 = jnp.asarray(np.array(-2, jnp.int2))
    reduce_13 = lax.reduce(broadcast_7, constant_12, lax.max, (0,))
    return reduce_13

p_1 = np.array(1, jnp.int2)
result = f(p_1)
print(result)
