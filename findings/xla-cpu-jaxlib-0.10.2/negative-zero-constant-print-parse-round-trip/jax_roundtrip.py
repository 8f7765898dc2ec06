# XLA prints a negative-zero constant as `-0`, and its HLO parser reads `-0` back as +0:
# a module printed by XLA (jax's HLO text, --xla_dump_to) does not parse back to itself.
import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import backend
from jaxlib import xla_client as xc
import jaxlib._jax as jaxlib_ext


def f(x):
    return x / jnp.float32(-0.0)


x = np.float32(1.0)
print("jax:", f(x), jax.jit(f)(x))                       # -inf: x / -0.0
text = jax.jit(f).lower(x).as_text(dialect="hlo")      # XLA's own printer
print(text)                                             # the constant is written `-0`
module = xc.hlo.hlo_module_from_text(text)              # XLA's own parser
print(module.to_string())                               # ... and reads it back as `0`
cpu = backend.get_backend("cpu")
exe = cpu.compile_and_load(jaxlib_ext.mlir.hlo_to_stablehlo(
    module.as_serialized_hlo_module_proto()), cpu.local_devices()[:1], xc.CompileOptions())
out = np.asarray(exe.execute([jax.device_put(x, cpu.local_devices()[0])])[0])
print("the printed module, parsed and run:", out)     # +inf
print("MISMATCH" if out != -np.inf else "MATCH")
