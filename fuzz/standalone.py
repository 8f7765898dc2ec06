"""Standalone reproducers: a Python script a maintainer pastes into an issue.

``standalone_script(module_text, inputs, oracle="xla")`` returns a script that needs only
jax/jaxlib (``oracle="xla"``) or tensorflow (``oracle="tf"``), numpy and ml_dtypes, never
hloref. It embeds the module and the inputs as literals (exact: a narrow float, a sub-byte
integer, or a value whose decimal form would not give back its bits, as its raw bits viewed
as its type), compiles the module as the oracle does (:mod:`.oracles.xla`: HLO text ->
``hlo_module_from_text`` -> ``hlo_to_stablehlo`` -> ``compile_and_load`` with the debug
options; :mod:`.oracles.tf`: the StableHLO jaxlib makes of it, run by ``XlaCallModule``
inside ``tf.function(jit_compile=True)``, with boundary types crossing as their carriers),
runs it and prints each result leaf. Given ``expected``, it prints it first (so a crash
still shows it) and then ``MATCH`` or ``MISMATCH`` with the first differing index: equal
means the same value with the same sign, any NaN equal to any NaN.

Besides the readable lines, the script prints one machine-readable line per result leaf::

    @leaf {"i": 0, "dtype": "float8_e3m4", "shape": [1, 5], "hex": "3c00..."}

(``hex``: the leaf's bytes as numpy holds them); ``run_script`` reads them back.

``run_script(script)`` runs a script in a fresh process (this interpreter, ``-I``, in an
empty directory, with ``import hloref`` made to fail, so that a script that needs hloref
fails) and returns a :class:`ScriptRun`; a crash is a result (``signal``), not an error.
"""

from __future__ import annotations

import inspect
import json
import os
import signal as signals
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

import numpy as np

__all__ = ["standalone_script", "run_script", "ScriptRun", "array_literal", "dtype_expr",
           "parse_leaves", "value_differs", "first_difference", "report_results"]

#: How much of the script's stderr a ScriptRun keeps.
STDERR_TAIL = 4000


def dtype_expr(dtype) -> str:
    """The Python expression of a numpy dtype: ``np.float32``, ``ml_dtypes.int2``."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return "np.bool_"
    if type(dtype).__module__.startswith("ml_dtypes") or dtype.type.__module__.startswith(
            "ml_dtypes"):
        return f"ml_dtypes.{dtype.name}"
    return f"np.{dtype.name}"


def _is_ml_dtype(dtype) -> bool:
    return dtype_expr(dtype).startswith("ml_dtypes.")


def _scalar(x) -> str:
    """A Python literal of a numpy scalar: the shortest decimal of its own type."""
    if isinstance(x, (complex, np.complexfloating)):
        return f"complex({_scalar(x.real)}, {_scalar(x.imag)})"
    name = np.dtype(type(x)).name if isinstance(x, np.generic) else type(x).__name__
    if "float" in name:
        if np.isnan(x):
            return "np.nan"
        if np.isinf(x):
            return "np.inf" if x > 0 else "-np.inf"
        return str(x)
    if "bool" in name:
        return repr(bool(x))
    return repr(int(x))


def _py(a: np.ndarray) -> str:
    """A (nested) list literal of ``a``'s values."""
    if a.ndim == 0:
        return _scalar(a[()])
    return "[" + ", ".join(_py(x) for x in a) + "]"


def _bits_dtype(dtype) -> np.dtype:
    return np.dtype(f"u{min(dtype.itemsize, 8)}")


def array_literal(a, *, readable: bool = False) -> str:
    """A Python expression (numpy as ``np``) that rebuilds the array ``a`` exactly: its
    dtype, shape and bits (sub-byte integers by value).

    Standard types whose decimal literal gives back their bits are written as values
    (``np.array([1.5, -2.0], np.float32)``); narrow (ml_dtypes) types, and values such as a
    NaN payload or a signed NaN, as their raw bits viewed as the type
    (``np.array([0x3c, 0x00], np.uint8).view(ml_dtypes.float8_e3m4)``). ``readable``
    writes narrow types as values too where that gives back their bits."""
    import ml_dtypes
    a = np.asarray(a)
    expr = dtype_expr(a.dtype)
    if readable or not _is_ml_dtype(a.dtype):
        text = f"np.array({_py(a)}, {expr})"
        back = eval(text, {"np": np, "ml_dtypes": ml_dtypes})  # noqa: S307 - our own literal
        if back.shape == a.shape and back.tobytes() == a.tobytes():
            return text
    bits = np.ascontiguousarray(a).reshape(-1).view(_bits_dtype(a.dtype))
    words = ", ".join(hex(int(w)) for w in bits)
    text = f"np.array([{words}], np.{bits.dtype.name}).view({expr})"
    if a.shape != (bits.size * bits.dtype.itemsize // a.dtype.itemsize,):
        text += f".reshape({tuple(a.shape)})"
    return text


def _flat(value) -> list:
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in _flat(v)]
    return [np.asarray(value)]


def _values_comment(a: np.ndarray, limit: int = 120) -> str:
    """``  # [1.5, 0.0]`` when the literal is written as bits and the values are short."""
    if not _is_ml_dtype(a.dtype):
        return ""
    text = repr(a.tolist())
    return f"  # {text}" if len(text) <= limit else ""


def _list_literal(name: str, leaves: list) -> list[str]:
    if not leaves:
        return [f"{name} = []"]
    lines = [f"{name} = ["]
    for a in leaves:
        lines.append(f"    {array_literal(a)},{_values_comment(a)}")
    lines.append("]")
    return lines


# -- the script's shared tail: printing and comparing ------------------------------------
# value_differs, first_difference and report_results run inside the scripts too: their
# source is copied into each script, so they use only numpy and json.


def value_differs(got, want):
    """Elementwise: not the same value (a float's sign counts; NaN equals NaN)."""
    if got.dtype.kind == "c":
        return value_differs(got.real, want.real) | value_differs(got.imag, want.imag)
    if "float" in got.dtype.name:
        g, w = got.astype(np.float64), want.astype(np.float64)
        same = (g == w) & (np.signbit(g) == np.signbit(w))
        return ~(same | (np.isnan(g) & np.isnan(w)))
    return got.astype(np.int64) != want.astype(np.int64)


def first_difference(got, want):
    """None when the result leaves ``got`` are the values ``want``, else where they differ."""
    if len(got) != len(want):
        return f"{len(got)} result leaves, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        if g.dtype != w.dtype or g.shape != w.shape:
            return f"result[{i}] is {g.dtype}{list(g.shape)}, expected {w.dtype}{list(w.shape)}"
        bad = np.argwhere(value_differs(g, w))
        if len(bad):
            at = tuple(int(k) for k in bad[0])
            return f"result[{i}] at index {at}: got {g[at]!r}, expected {w[at]!r}"
    return None


def report_results(results, expected):
    """Print each result leaf (readable, then its ``@leaf`` line) and the comparison."""
    for i, r in enumerate(results):
        print(f"result[{i}] {r.dtype.name}{list(r.shape)} = {r.tolist()!r}")
        print("@leaf", json.dumps({"i": i, "dtype": r.dtype.name, "shape": list(r.shape),
                                   "hex": r.tobytes().hex()}))
    if expected is not None:
        where = first_difference(results, expected)
        print("MATCH" if where is None else f"MISMATCH {where}")


_DRIVER = """

if EXPECTED is not None:
    for i, e in enumerate(EXPECTED):
        print(f"expected[{i}] {e.dtype.name}{list(e.shape)} = {e.tolist()!r}", flush=True)
report_results(run(INPUTS), EXPECTED)
"""


def _tail() -> str:
    parts = [inspect.getsource(f) for f in (value_differs, first_difference, report_results)]
    return "\n\n" + "\n\n".join(parts) + _DRIVER


_XLA_RUN = '''

def run(inputs):
    """Compile and run as jax's XLA:CPU client does: HLO text -> HloModule ->
    StableHLO -> compile_and_load, with DEBUG_OPTIONS (the DebugOptions fields the
    Python binding exposes are set there, any other as an option override)."""
    module = xc.hlo.hlo_module_from_text(HLO)
    stablehlo = jaxlib_ext.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
    options = xc.CompileOptions()
    debug = options.executable_build_options.debug_options
    overrides = []
    for name, value in DEBUG_OPTIONS.items():
        if hasattr(debug, name):
            setattr(debug, name, value)
        else:
            overrides.append((name, value))
    if overrides:
        options.env_option_overrides = overrides
    cpu = backend.get_backend("cpu")
    device = cpu.local_devices()[0]
    with jax.enable_x64(True):  # keep 64-bit inputs and results as they are
        executable = cpu.compile_and_load(stablehlo, [device], options)
        outputs = executable.execute([jax.device_put(x, device) for x in inputs])
        return [np.array(o) for o in outputs]
'''

_TF_RUN = '''

def run(inputs):
    """TF's XLA:CPU runs the StableHLO through XlaCallModule under jit_compile=True."""
    args = [tf.constant(to_tf(x)) for x, to_tf in zip(inputs, TO_TF)]
    version = min(10, int(tfxla.call_module_maximum_supported_version()))

    @tf.function(jit_compile=True, autograph=False)
    def call(*xs):
        return tfxla.call_module(
            list(xs), version=version, module=STABLEHLO, Tout=[tf.as_dtype(t) for t in TOUT],
            Sout=SOUT, platforms=["CPU"], function_list=[], has_token_input_output=False,
            disabled_checks=[])

    with tf.device("/CPU:0"):
        outputs = call(*args)
    return [from_tf(np.asarray(o.numpy())) for o, from_tf in zip(outputs, FROM_TF)]
'''


def _module_text_literal(text: str) -> str:
    if '"""' in text or text.endswith("\\"):
        return repr(text)
    return 'r"""\n' + text.strip("\n") + '\n"""'


def standalone_script(module_text: str, inputs: list, *, oracle: str = "xla",
                      debug_options: dict | None = None, expected=None, actual=None) -> str:
    """A self-contained Python script that runs ``module_text`` on ``inputs`` (one value
    per entry parameter, tuples for tuple-shaped ones) the way the ``oracle`` (``"xla"``:
    jaxlib's XLA:CPU; ``"tf"``: TensorFlow's XLA) does, and prints the results.

    ``expected`` (a value, or a tuple/list of result leaves) makes the script print it and
    compare; ``actual`` (what the oracle returned when the finding was made) is written
    into the script as a comment. Raises ValueError for an oracle other than xla/tf or a
    module on several devices."""
    if oracle not in ("xla", "tf"):
        raise ValueError(f"standalone_script: oracle must be 'xla' or 'tf', got {oracle!r}")
    debug_options = dict(debug_options or {})
    leaves = _flat(list(inputs))
    want = None if expected is None else _flat(expected)
    head = [f"# {'jaxlib XLA:CPU' if oracle == 'xla' else 'TensorFlow XLA:CPU'} reproducer: "
            f"needs only {'jax/jaxlib' if oracle == 'xla' else 'tensorflow'}, numpy and "
            f"ml_dtypes."]
    if actual is not None:
        found = [a.tolist() for a in _flat(actual)]
        text = repr(found if len(found) > 1 else found[0])
        if len(text) <= 300:
            head.append(f"# When found, it returned {text}.")
    if oracle == "xla":
        body = _xla_script(module_text, leaves, debug_options)
    else:
        body = _tf_script(module_text, leaves, debug_options)
    lines = head + body + ["", "# The value the semantics give (None: not compared)."]
    lines += _list_literal("EXPECTED", want) if want is not None else ["EXPECTED = None"]
    return "\n".join(lines) + "\n" + _tail()


def _check_devices(module_text: str) -> None:
    from .oracles.xla import device_counts
    replicas, partitions = device_counts(module_text)
    if replicas * partitions > 1:
        raise ValueError(f"standalone_script: the module runs on {replicas * partitions} "
                         f"devices; only single-device modules are supported")


def _xla_script(module_text: str, leaves: list, debug_options: dict) -> list[str]:
    _check_devices(module_text)
    lines = ["import json", "", "import jax", "import jaxlib._jax as jaxlib_ext",
             "import ml_dtypes", "import numpy as np", "from jax.extend import backend",
             "from jaxlib import xla_client as xc", ""]
    if "lapack_" in module_text:  # jax fills its LAPACK table when it first lowers linalg
        lines += ["from jaxlib import lapack", "", "lapack._lapack.initialize()", ""]
    lines += [f"HLO = {_module_text_literal(module_text)}", "",
              "# One array per entry parameter leaf (tuple parameters flattened), in order."]
    lines += _list_literal("INPUTS", leaves)
    lines += ["", f"DEBUG_OPTIONS = {debug_options!r}"]
    return lines + _XLA_RUN.rstrip("\n").split("\n")


def _tf_script(module_text: str, leaves: list, debug_options: dict) -> list[str]:
    from hloref.types import element_type

    from .oracles.tf import BOUNDARY_TYPES, tf_stablehlo
    _check_devices(module_text)
    artifact, in_types, out_types = tf_stablehlo(module_text)
    stablehlo = _stablehlo_text(artifact)
    to_tf, from_tf, tout = [], [], []
    for name in in_types:
        to_tf.append(_boundary_lambda(name, BOUNDARY_TYPES.get(name), outward=False))
    for name in out_types:
        from_tf.append(_boundary_lambda(name, BOUNDARY_TYPES.get(name), outward=True))
        carrier = BOUNDARY_TYPES[name][0] if name in BOUNDARY_TYPES else name
        tout.append(dtype_expr(element_type(carrier).dtype))
    sout = _output_dims(module_text)
    lines = ["import json", "import os", "", 'os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")']
    if debug_options:  # TF reads XLA's debug options once, from XLA_FLAGS
        flags = " ".join(f"--{k}={str(v).lower() if isinstance(v, bool) else v}"
                         for k, v in debug_options.items())
        lines.append(f"os.environ['XLA_FLAGS'] = {flags!r}")
    lines += ["", "import ml_dtypes", "import numpy as np", "import tensorflow as tf",
              "from tensorflow.compiler.tf2xla.python import xla as tfxla", "",
              "# The HLO module; TF takes no HLO text, so it runs the StableHLO that jaxlib "
              "converts it to", "# (hlo_to_stablehlo), printed below."]
    lines += [("# " + line).rstrip() for line in module_text.strip("\n").split("\n")]
    lines += ["", f"STABLEHLO = {_module_text_literal(stablehlo)}", "",
              "# One array per entry parameter leaf (tuple parameters flattened), in order."]
    lines += _list_literal("INPUTS", leaves)
    lines += ["", "# Types TF has no usable dtype for cross as a carrier type (main converts).",
              f"TO_TF = [{', '.join(to_tf)}]", f"FROM_TF = [{', '.join(from_tf)}]",
              f"TOUT = [{', '.join(tout)}]", f"SOUT = {sout!r}"]
    return lines + _TF_RUN.rstrip("\n").split("\n")


def _boundary_lambda(name: str, boundary, *, outward: bool) -> str:
    from hloref.types import element_type
    if boundary is None:
        return "lambda x: x"
    carrier, _, op = boundary
    target = dtype_expr(element_type(name if outward else carrier).dtype)
    return f"lambda x: x.{'view' if op == 'bitcast_convert' else 'astype'}({target})"


def _output_dims(module_text: str) -> list[tuple]:
    import hloref
    from hloref.shapes import flatten_shape
    module = hloref.parse(module_text)
    return [tuple(s.dims) for s in flatten_shape(module.entry.root.shape)]


def _stablehlo_text(artifact: bytes) -> str:
    """The portable artifact as StableHLO text (what XlaCallModule deserializes it to)."""
    import jaxlib._jax as jaxlib_ext
    from jax._src.interpreters import mlir as jax_mlir
    with jax_mlir.make_ir_context() as context:
        module = jaxlib_ext.mlir.deserialize_portable_artifact(artifact, context)
        return module.operation.get_asm(enable_debug_info=False)


# -- running a script --------------------------------------------------------------------


@dataclass
class ScriptRun:
    """What a reproducer script did: its exit status (``signal``: the signal's name when
    it was killed by one), its output, and the result leaves it printed."""
    returncode: int | None
    signal: str | None
    stdout: str
    stderr_tail: str
    values: list = field(default_factory=list)
    verdict: str | None = None  # "MATCH" / "MISMATCH" when the script compared
    timed_out: bool = False

    @property
    def crashed(self) -> bool:
        return self.signal is not None or (self.returncode not in (0, None))


#: Run first in the script's process: ``import hloref`` fails there.
_GUARD = """
import importlib.abc, runpy, sys
class NoHloref(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "hloref" or name.startswith("hloref."):
            raise ImportError("the reproducer imported " + name + ": it must not need hloref")
sys.meta_path.insert(0, NoHloref())
sys.argv = [sys.argv[1]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def run_script(script: str, *, timeout: float = 120.0) -> ScriptRun:
    """Run ``script`` with this interpreter in a fresh process (isolated mode, in an empty
    temporary directory, ``import hloref`` failing) and collect what it printed."""
    with tempfile.TemporaryDirectory(prefix="hloref-repro-") as tmp:
        path = os.path.join(tmp, "repro.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(script)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSTARTUP")}
        try:
            proc = subprocess.run([sys.executable, "-I", "-c", _GUARD, path], cwd=tmp, env=env,
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (
                e.stdout or "")
            err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (
                e.stderr or "")
            return ScriptRun(None, None, out, err[-STDERR_TAIL:], parse_leaves(out),
                             _verdict(out), timed_out=True)
    rc = proc.returncode
    name = None
    if rc < 0:
        try:
            name = signals.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
    return ScriptRun(rc, name, proc.stdout, proc.stderr[-STDERR_TAIL:],
                     parse_leaves(proc.stdout), _verdict(proc.stdout))


def _verdict(stdout: str) -> str | None:
    for line in stdout.splitlines():
        if line == "MATCH" or line.startswith("MISMATCH"):
            return "MATCH" if line == "MATCH" else "MISMATCH"
    return None


def _dtype(name: str) -> np.dtype:
    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes
        return np.dtype(getattr(ml_dtypes, name))


def parse_leaves(stdout: str) -> list[np.ndarray]:
    """The result leaves a reproducer printed (its ``@leaf`` lines), in order."""
    out = []
    for line in stdout.splitlines():
        if line.startswith("@leaf "):
            rec = json.loads(line[len("@leaf "):])
            a = np.frombuffer(bytes.fromhex(rec["hex"]), _dtype(rec["dtype"]))
            out.append(a.reshape(rec["shape"]))
    return out
