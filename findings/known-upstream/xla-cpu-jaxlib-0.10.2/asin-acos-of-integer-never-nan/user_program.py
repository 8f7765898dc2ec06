import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


@jax.jit
def f(p):
    c = lax.convert_element_type(p, jnp.float32)
    a = lax.asin(c)
    isnan = lax.ne(a, a)
    return isnan

p = np.array([-11, 3, 0], np.int32)
result = f(p)
print(result)
