import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


@jax.jit
def f():
    constant_14 = jnp.asarray(np.array(-2147483648, np.int32))
    convert_18 = lax.convert_element_type(constant_14, jnp.float8_e8m0fnu)
    return convert_18

result = f()
print(result)
