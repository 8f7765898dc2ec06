import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


@jax.jit
def f(p):
    as_pred = lax.convert_element_type(p, jnp.bool_)
    pred_as_u16 = lax.convert_element_type(as_pred, jnp.uint16)
    as_u16 = lax.convert_element_type(p, jnp.uint16)
    sum = lax.add(pred_as_u16, as_u16)
    return sum

p = np.array([[-2, -1.5, -1], [-0.5, 0, 0.5], [1, 1.5, 2], [2.5, 3, 300]], jnp.bfloat16)
result = f(p)
print(result)
