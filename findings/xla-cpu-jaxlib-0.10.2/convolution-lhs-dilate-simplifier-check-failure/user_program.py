import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


@jax.jit
def f(p_14, broadcast_13_cut):
    convolution_15 = lax.conv_general_dilated(broadcast_13_cut, p_14, window_strides=(2, 1), padding=((1, 1), (0, 0)), lhs_dilation=(2, 2), rhs_dilation=(1, 1), dimension_numbers=lax.ConvDimensionNumbers(lhs_spec=(3, 2, 0, 1), rhs_spec=(2, 1, 0, 3), out_spec=(2, 0, 3, 1)), feature_group_count=1, batch_group_count=1, preferred_element_type=jnp.float32)
    return convolution_15

p_14 = np.array([[[[1.0, 1.0]], [[1.0, 1.0]], [[1.0, 1.0]]], [[[1.0, 1.0]], [[1.0, 1.0]], [[1.0, 1.0]]], [[[1.0, 1.0]], [[1.0, 1.0]], [[1.0, 1.0]]]], np.float32)
broadcast_13_cut = np.array([[[[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]], [[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]], [[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]], [[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]]]], np.float32)
result = f(p_14, broadcast_13_cut)
print(result)
