import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

jax.config.update("jax_enable_x64", True)


@jax.jit
def f(p_1, p_15, constant_14_cut, constant_13_cut):
    reshape_2 = lax.reshape(p_1, (2, 1, 4))
    convert_6 = lax.convert_element_type(p_1, jnp.int64)
    reshape_10 = lax.reshape(convert_6, (8,))
    slice_11 = lax.slice(reshape_10, (2,), (5,), (1,))
    reshape_12 = lax.reshape(slice_11, (1, 1, 3))
    dynamic_update_slice_16 = lax.dynamic_update_slice(reshape_2, reshape_12, [constant_13_cut, constant_14_cut, p_15], allow_negative_indices=False)
    return dynamic_update_slice_16

p_1 = np.array([[-2, 7], [6, -3], [-5, 2], [7, -7]], np.int64)
p_15 = np.array(0, np.int8)
constant_14_cut = np.array(4, np.int8)
constant_13_cut = np.array(5, np.int8)
result = f(p_1, p_15, constant_14_cut, constant_13_cut)
print(result)
