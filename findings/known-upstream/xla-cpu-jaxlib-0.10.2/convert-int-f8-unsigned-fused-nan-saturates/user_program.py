import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


@jax.jit
def f(p):
    f8 = lax.convert_element_type(p, jnp.float8_e4m3fn)
    back = lax.convert_element_type(f8, jnp.uint32)
    return back

p = np.array([3000000000, 500, 5], np.uint32)
result = f(p)
print(result)
