import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


@jax.jit
def f(p_1):
    add_2 = lax.add(p_1, p_1)
    convert_4 = lax.convert_element_type(add_2, jnp.int8)
    return convert_4

p_1 = np.array([[[-4, -8], [0, -6]], [[-7, 7], [4, 5]], [[6, -1], [1, 5]], [[3, -1], [-4, -2]]], jnp.int4)
result = f(p_1)
print(result)
