# XLA prints the complex constant (nan, inf) as `(nan, inf)`, and its HLO parser reads it
# back as (nan, nan) (hlo_parser.cc SetValueInLiteralHelper passes the real part's NaN where
# the imaginary part's is meant): a module printed by XLA does not parse back to itself.
import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import backend
from jaxlib import xla_client as xc
import jaxlib._jax as jaxlib_ext

NUMERATOR = np.complex64(complex(np.nan, np.inf))


def f(x):
    return jnp.asarray(NUMERATOR) / x


x = np.complex64(1 + 1j)
want = np.asarray(jax.jit(f)(x))                        # (inf, inf): C99 G.5.1, as jax gives it
text = jax.jit(f).lower(x).as_text(dialect="hlo")      # XLA's own printer
print(text)                                             # the constant is written `(nan, inf)`
module = xc.hlo.hlo_module_from_text(text)              # XLA's own parser
print(module.to_string())                               # ... and reads it back as `(nan, nan)`
cpu = backend.get_backend("cpu")
exe = cpu.compile_and_load(jaxlib_ext.mlir.hlo_to_stablehlo(
    module.as_serialized_hlo_module_proto()), cpu.local_devices()[:1], xc.CompileOptions())
got = np.asarray(exe.execute([jax.device_put(x, cpu.local_devices()[0])])[0])
print("jax:", want, " the printed module, parsed and run:", got)
same = np.array_equal(np.isnan([got.real, got.imag]), np.isnan([want.real, want.imag]))
print("MATCH" if same else "MISMATCH")
