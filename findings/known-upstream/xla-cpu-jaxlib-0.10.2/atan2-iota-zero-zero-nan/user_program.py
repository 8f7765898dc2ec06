import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

jax.config.update("jax_enable_x64", True)


@jax.jit
def f():
    iota_1 = lax.broadcasted_iota(jnp.float64, (2, 2), 0)
    atan2_2 = lax.atan2(iota_1, iota_1)
    return atan2_2

result = f()
print(result)
