import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

jax.config.update("jax_enable_x64", True)


@jax.jit
def f(x0):
    log_plus_one_2 = lax.log1p(x0)
    return log_plus_one_2

x0 = np.array([-0.374664685494311], np.float64)
result = f(x0)
print(result)
