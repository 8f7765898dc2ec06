import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


@jax.jit
def f():
    constant_6 = jnp.asarray(np.array(65535, np.uint16))
    broadcast_8 = lax.broadcast_in_dim(constant_6, (2, 2, 4), ())
    constant_9 = jnp.asarray(np.array([[[6], [6]], [[3], [2]]], np.uint16))
    convolution_10 = lax.conv_general_dilated(broadcast_8, constant_9, window_strides=(1,), padding=((1, 1),), lhs_dilation=(2,), rhs_dilation=(1,), dimension_numbers=lax.ConvDimensionNumbers(lhs_spec=(2, 0, 1), rhs_spec=(0, 1, 2), out_spec=(1, 0, 2)), feature_group_count=1, batch_group_count=2, preferred_element_type=jnp.uint16)
    return convolution_10

result = f()
print(result)
