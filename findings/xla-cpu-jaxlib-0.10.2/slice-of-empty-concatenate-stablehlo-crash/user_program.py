import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


@jax.jit
def f(p_1, p_2):
    concatenate_3 = lax.concatenate([p_1, p_2, p_1], 0)
    constant_4 = jnp.asarray(np.array(1, np.int32))
    dynamic_slice_5 = lax.dynamic_slice(concatenate_3, [constant_4], (0,), allow_negative_indices=False)
    return dynamic_slice_5

p_1 = np.array([], np.float32)
p_2 = np.array([-0.36183688], np.float32)
result = f(p_1, p_2)
print(result)
