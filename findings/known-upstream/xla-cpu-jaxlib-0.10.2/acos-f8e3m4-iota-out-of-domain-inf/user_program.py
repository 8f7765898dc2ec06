import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


@jax.jit
def f():
    i = lax.broadcasted_iota(jnp.float8_e3m4, (1, 5), 1)
    a = lax.acos(i)
    return a

result = f()
print(result)
