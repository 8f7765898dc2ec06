import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


@jax.jit
def f(p_1):
    convert_2 = lax.convert_element_type(p_1, jnp.bool_)
    return convert_2

p_1 = np.array([], np.complex64)
result = f(p_1)
print(result)
