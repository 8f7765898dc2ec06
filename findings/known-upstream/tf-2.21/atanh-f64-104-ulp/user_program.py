import numpy as np
import tensorflow as tf


@tf.function(jit_compile=True)
def f(x0):
    atanh_2 = tf.math.atanh(x0)
    return atanh_2

x0 = np.array([0.41085600773100933], np.float64)
result = f(x0)
print(result)
