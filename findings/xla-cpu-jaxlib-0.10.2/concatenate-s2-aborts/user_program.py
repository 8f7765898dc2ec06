import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


@jax.jit
def f(p_1):
    concatenate_11 = lax.concatenate([p_1, p_1], 1)
    return concatenate_11

p_1 = np.array([[1], [0], [0], [0]], jnp.int2)
result = f(p_1)
print(result)
