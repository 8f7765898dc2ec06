import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


@jax.jit
def f():
    constant_7 = jnp.asarray(np.array(0, jnp.uint2))
    divide_8 = lax.div(constant_7, constant_7)
    return divide_8

result = f()
print(result)
