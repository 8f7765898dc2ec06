import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

jax.config.update("jax_enable_x64", True)


@jax.jit
def f(p_1):
    convert_2 = lax.convert_element_type(p_1, jnp.int64)
    return convert_2

p_1 = np.array(-6, jnp.float4_e2m1fn)
result = f(p_1)
print(result)
