import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


@jax.jit
def f(complex_2_cut):
    constant_1 = jnp.asarray(np.array([complex(1.0, np.inf), complex(np.inf, 1.0), complex(np.inf, np.nan), complex(np.inf, np.inf), complex(np.nan, np.inf)], np.complex64))
    divide_1 = lax.div(constant_1, complex_2_cut)
    return divide_1

complex_2_cut = np.array([complex(1.0, 1.0), complex(1.0, 1.0), complex(1.0, 1.0), complex(1.0, 1.0), complex(1.0, 1.0)], np.complex64)
result = f(complex_2_cut)
print(result)
