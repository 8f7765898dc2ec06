import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


@jax.jit
def f(p_3):
    sort_8 = lax.sort(p_3, dimension=1, is_stable=True)
    return sort_8

p_3 = np.array([[-2, -1, -2, -2, 0]], jnp.int2)
result = f(p_3)
print(result)
