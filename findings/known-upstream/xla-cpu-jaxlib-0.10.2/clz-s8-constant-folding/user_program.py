import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


@jax.jit
def f():
    constant_4 = jnp.asarray(np.array(-3, np.int8))
    count_leading_zeros_6 = lax.clz(constant_4)
    return count_leading_zeros_6

result = f()
print(result)
