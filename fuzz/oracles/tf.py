"""TensorFlow's XLA as an oracle (an older XLA than jaxlib's, hence an independent opinion).

Two routes into the XLA that TensorFlow 2.21 bundles:

Path 1, HLO text in (the oracle proper, the interface of :mod:`.xla`)::

    HLO text --xla_client.hlo.hlo_module_from_text (jaxlib)--> HloModule
             --jaxlib._jax.mlir.hlo_to_stablehlo-->             StableHLO bytecode
             --jaxlib._jax.mlir.serialize_portable_artifact-->  versioned portable artifact
             --tf.raw_ops.XlaCallModule inside tf.function(jit_compile=True)--> TF's XLA:CPU

  ``compile_hlo(text)`` returns a :class:`TfExecutable` (cached, LRU); ``.run(*args)``
  returns numpy values in hloref's convention (an array, or nested tuples of arrays for a
  tuple-shaped result); ``.optimized_hlo()`` is the module TF's XLA compiled (from
  ``experimental_get_compiler_ir(...)(stage="optimized_hlo")``) and ``.tf_hlo()`` the HLO
  TF handed to XLA (``stage="hlo"``). ``run_hlo(text, *args)`` does both.

  Only the *parsing* of the text and the HLO -> StableHLO conversion are jaxlib's; every
  optimization pass and the code generation are TF's own XLA. The portable artifact is
  serialized for StableHLO :data:`TARGET_VERSION` (an older version than jaxlib's own, so
  that TF's older StableHLO can read it); XlaCallModule's calling-convention version is the
  highest both sides know (``min(10, call_module_maximum_supported_version())``).

Path 2, TF programs in (``native_module(fn, *args) -> (hlo_text, value)``): ``fn`` is built
from TF ops (typically the ``tf2xla`` ones: ``tf.raw_ops.XlaDotV2``, ``XlaConvV2``,
``XlaReduceWindow``, ``XlaGather``, ``XlaSort``...), compiled with ``jit_compile=True``;
the HLO text TF produced for it is returned along with TF's value, so that hloref can
evaluate the very module TF's XLA ran.

Calling convention
------------------
hlo_to_stablehlo flattens tuple-shaped entry parameters and results (``main`` gets one
argument per array leaf, empty tuples vanish); this module flattens tuple arguments and
rebuilds the result nesting from the program shape, as :mod:`.xla` does. As there, entry
layouts and module-level attributes do not survive the trip through StableHLO.

Element types (TF 2.21, each checked by a parameter -> convert -> result round trip)
------------------------------------------------------------------------------------
* cross the boundary as themselves (:data:`TF_DTYPES`): pred, s8, s16, s32, s64, u8, u16,
  u32, u64, f16, bf16, f32, f64, c64, c128, f8e4m3fn, f8e5m2, f8e4m3fnuz, f8e5m2fnuz,
  f8e4m3b11fnuz.
* cross it as a carrier (:data:`BOUNDARY_TYPES`; ``main`` is wrapped in StableHLO so TF
  only sees the carrier, while TF's XLA still computes in the module's own type):
  s2/u2/s4/u4 as s8/u8 (``convert``), f4e2m1fn as f32 (``convert``), f8e4m3 / f8e3m4 /
  f8e8m0fnu as u8 (``bitcast_convert``). Why: TF's tf.int4/tf.uint4 buffers hold one
  element per byte but TF's XLA reads them *packed* (``s4[4] {0,1,-1,2}`` arrives as
  ``{0,0,1,0}``: a real TF bug, worked around here); tf.int2/uint2/float4_e2m1fn have no
  XLA_CPU_JIT kernels ("No registered '_Arg' OpKernel for XLA_CPU_JIT"); the other f8 types
  have no TF dtype at all.
* raise :class:`OracleUnsupported` before anything is compiled (:data:`UNSUPPORTED_TYPES`):
  s1/u1 (hlo_to_stablehlo maps them to i1), f6e2m3fn/f6e3m2fn. Also ``token`` parameters or
  results, the ``bitcast`` opcode (layouts are lost in StableHLO, as for :mod:`.xla`), and ops
  with no portable StableHLO form (``ragged-dot``, ``stochastic-convert``: the artifact
  serializer fails to legalize ``mhlo.*``), which :mod:`.xla` can run since it compiles the
  bytecode directly.

Other verdicts: TF's own errors (an unknown custom-call target, shape errors in
XlaCallModule's shape refinement, XLA compile errors) are :class:`OracleError`; TF compiles
at the first ``run``, so compile errors surface there. TF's XLA:CPU flushes subnormals to
zero at run time, like jaxlib's.

Debug options
-------------
TF reads XLA's debug options once per process from ``XLA_FLAGS``; they cannot be set per
module. ``compile_hlo(text, debug_options={...})`` with a non-empty dict raises
:class:`OracleUnsupported` (set ``XLA_FLAGS`` before the worker starts instead).

Importing this module does not import TensorFlow (nor jax); the first compile does
(about 10-20 s for TF), with ``TF_CPP_MIN_LOG_LEVEL=2`` and GPUs hidden from TF.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any

import numpy as np

from .errors import OracleError, OracleUnsupported
from .xla import (ExecutableCache, OracleExecutable, flatten_argument,  # shared with XLA
                  load_program, loads, rebuild_result, xla_shape_text)

__all__ = ["TfExecutable", "compile_hlo", "run_hlo", "available", "clear_cache", "tf_stablehlo",
           "native_module", "native_function", "tf_modules", "OracleError", "OracleUnsupported",
           "UNSUPPORTED_TYPES", "TF_DTYPES", "BOUNDARY_TYPES", "CACHE_SIZE", "TARGET_VERSION"]

#: StableHLO version the portable artifact is written for (TF 2.21 reads it; jaxlib 0.10.2
#: writes 1.17.0 natively, which is newer than TF's StableHLO).
TARGET_VERSION = os.environ.get("HLOREF_TF_STABLEHLO_VERSION", "1.10.0")

#: How many compiled executables the LRU cache keeps.
CACHE_SIZE = 64

#: HLO element type -> name of the tf dtype (attribute of tensorflow.python.framework.dtypes)
#: for the types that cross the TF boundary as themselves.
TF_DTYPES: dict[str, str] = {
    "pred": "bool",
    "s8": "int8", "s16": "int16", "s32": "int32", "s64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
    "f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
    "c64": "complex64", "c128": "complex128",
    "f8e4m3fn": "float8_e4m3fn", "f8e5m2": "float8_e5m2",
    "f8e4m3fnuz": "float8_e4m3fnuz", "f8e5m2fnuz": "float8_e5m2fnuz",
    "f8e4m3b11fnuz": "float8_e4m3b11fnuz",
}

#: Element types that cannot cross the TF boundary as themselves, and the carrier they cross
#: as: HLO type -> (carrier HLO type, carrier MLIR element type, StableHLO op turning one
#: into the other). ``main`` is wrapped so that TF sees only carriers; inside, the module's
#: own types are kept, so TF's XLA still computes with them. Every conversion is exact.
#:
#: * s4/u4: TF 2.21 has tf.int4/tf.uint4 (one element per byte) but its XLA reads and writes
#:   those buffers *packed* (two per byte): ``s4[4] {0,1,-1,2}`` arrives as ``{0,0,1,0}``.
#: * s2/u2, f4e2m1fn: TF has the dtypes but registers no XLA_CPU_JIT kernels for them
#:   ("No registered '_Arg' OpKernel for XLA_CPU_JIT").
#: * f8e4m3, f8e3m4, f8e8m0fnu: TF 2.21 has no dtype for them at all.
BOUNDARY_TYPES: dict[str, tuple[str, str, str]] = {
    "s4": ("s8", "i8", "convert"), "u4": ("u8", "ui8", "convert"),
    "s2": ("s8", "i8", "convert"), "u2": ("u8", "ui8", "convert"),
    "f4e2m1fn": ("f32", "f32", "convert"),
    "f8e4m3": ("u8", "ui8", "bitcast_convert"), "f8e3m4": ("u8", "ui8", "bitcast_convert"),
    "f8e8m0fnu": ("u8", "ui8", "bitcast_convert"),
}

#: Element types this oracle refuses, with the reason.
UNSUPPORTED_TYPES: dict[str, str] = {
    "s1": "hlo_to_stablehlo maps s1 to i1 (pred), and TF has no 1-bit integer dtype",
    "u1": "hlo_to_stablehlo maps u1 to i1 (pred), and TF has no 1-bit integer dtype",
    "f6e2m3fn": "TF 2.21 has no float6 dtypes (and XLA:CPU cannot compile them)",
    "f6e3m2fn": "TF 2.21 has no float6 dtypes (and XLA:CPU cannot compile them)",
}
_MHLO_ONLY_RE = re.compile(r"failed to legalize operation '(mhlo\.\w+)'")

_state: dict[str, Any] = {}
_state_lock = threading.Lock()


def _message(e: BaseException) -> str:
    msg = str(e)
    # TF errors carry the whole graph-building stack trace; the first lines say it all.
    lines = msg.splitlines()
    if len(lines) > 30:
        msg = "\n".join(lines[:30]) + f"\n... ({len(lines) - 30} more lines)"
    return f"{type(e).__name__}: {msg}"


def _tf():
    """Import TensorFlow (CPU only, quiet) and jaxlib lazily; returns the state dict."""
    if "tf" in _state:
        return _state
    with _state_lock:
        if "tf" in _state:
            return _state
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        try:
            import tensorflow as tf
            from tensorflow.compiler.tf2xla.python import xla as tfxla
            from tensorflow.python.framework import dtypes as tf_dtypes
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise OracleUnsupported(f"the TF oracle needs tensorflow: {e}") from e
        try:
            tf.config.set_visible_devices([], "GPU")
        except Exception:  # pragma: no cover - already initialized / no GPU support
            pass
        try:
            max_version = int(tfxla.call_module_maximum_supported_version())
        except AttributeError:  # pragma: no cover - very old TF
            max_version = 6
        _state.update(tf=tf, tfxla=tfxla, dtypes=tf_dtypes,
                      call_version=min(10, max_version))
    return _state


def _jaxlib():
    if "xc" not in _state:
        try:
            import jaxlib._jax as _jaxmod
            from jaxlib import xla_client as xc
        except ImportError as e:  # pragma: no cover
            raise OracleUnsupported(f"the TF oracle parses HLO text with jaxlib: {e}") from e
        _state["xc"], _state["_jax"] = xc, _jaxmod
    return _state["xc"], _state["_jax"]


def available() -> bool:
    """True when tensorflow (with XlaCallModule) and jaxlib import."""
    return loads(_tf, _jaxlib)


def clear_cache() -> None:
    """Drop every cached executable."""
    _cache.clear()






def _leaves(shape, out: list) -> list:
    if shape.is_tuple():
        for s in shape.tuple_shapes():
            _leaves(s, out)
    else:
        out.append(shape)
    return out


def _type_name(shape) -> str:
    """The HLO element-type name of an array shape (``f32``, ``bf16``...)."""
    s = xla_shape_text(shape)
    return s.split("[", 1)[0]


def _tf_dtype(name: str):
    st = _tf()
    tf_name = TF_DTYPES.get(name)
    if tf_name is None or not hasattr(st["dtypes"], tf_name):
        reason = UNSUPPORTED_TYPES.get(name, "no TensorFlow dtype for it")
        raise OracleUnsupported(f"TF oracle does not support element type {name}: {reason}")
    return getattr(st["dtypes"], tf_name)


def _carrier(name: str) -> str:
    """The HLO type a leaf of element type ``name`` crosses the TF boundary as."""
    return BOUNDARY_TYPES[name][0] if name in BOUNDARY_TYPES else name


def _wrap_main(bytecode: bytes, in_types: list[str], out_types: list[str]) -> str:
    """Textual MLIR of the module with ``main`` renamed ``hloref_inner`` (private) and a new
    ``main`` that takes/returns carriers for the leaves whose type is in BOUNDARY_TYPES."""
    from jax._src.interpreters import mlir as jm
    from jax._src.lib.mlir import ir
    with jm.make_ir_context():
        module = ir.Module.parse(bytecode)
        main = None
        for op in module.body.operations:
            if "sym_name" in op.attributes and ir.StringAttr(op.attributes["sym_name"]).value == "main":
                main = op
        if main is None:  # pragma: no cover - hlo_to_stablehlo always names the entry main
            raise OracleError("the StableHLO module has no main function")
        ft = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
        ins = [str(t) for t in ft.inputs]
        outs = [str(t) for t in ft.results]
        text = str(module)
    if len(ins) != len(in_types) or len(outs) != len(out_types):  # pragma: no cover
        raise OracleError(f"StableHLO main has {len(ins)} -> {len(outs)} values, the program "
                          f"shape {len(in_types)} -> {len(out_types)} leaves")
    if text.count("func.func @main(") != 1:  # pragma: no cover
        raise OracleError("cannot find the public main function in the StableHLO text")
    text = text.replace("func.func @main(", "func.func private @hloref_inner(")

    def carrier_type(t: str, name: str) -> str:
        if name not in BOUNDARY_TYPES:
            return t
        body = t[len("tensor<"):-1]
        dims, _, _ = body.rpartition("x") if "x" in body and body[0].isdigit() else ("", "", body)
        mlir = BOUNDARY_TYPES[name][1]
        return f"tensor<{dims}x{mlir}>" if dims else f"tensor<{mlir}>"

    c_ins = [carrier_type(t, n) for t, n in zip(ins, in_types)]
    c_outs = [carrier_type(t, n) for t, n in zip(outs, out_types)]
    lines = []
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(c_ins))
    lines.append(f"  func.func public @main({args}) -> ({', '.join(c_outs)}) {{")
    inner_args = []
    for i, (t, ct, n) in enumerate(zip(ins, c_ins, in_types)):
        if n in BOUNDARY_TYPES:
            op = BOUNDARY_TYPES[n][2]
            lines.append(f'    %c{i} = "stablehlo.{op}"(%a{i}) : ({ct}) -> {t}')
            inner_args.append(f"%c{i}")
        else:
            inner_args.append(f"%a{i}")
    sig = f"({', '.join(ins)}) -> ({', '.join(outs)})"
    n = len(outs)
    res = "" if n == 0 else ("%r = " if n == 1 else f"%r:{n} = ")
    lines.append(f"    {res}func.call @hloref_inner({', '.join(inner_args)}) : {sig}")
    rets = []
    for i, (t, ct, name) in enumerate(zip(outs, c_outs, out_types)):
        ref = "%r" if n == 1 else f"%r#{i}"
        if name in BOUNDARY_TYPES:
            op = BOUNDARY_TYPES[name][2]
            lines.append(f'    %o{i} = "stablehlo.{op}"({ref}) : ({t}) -> {ct}')
            rets.append(f"%o{i}")
        else:
            rets.append(ref)
    lines.append(f"    return {', '.join(rets)} : {', '.join(c_outs)}" if rets else "    return")
    lines.append("  }")
    end = text.rstrip().rfind("}")
    return text[:end] + "\n".join(lines) + "\n}\n"


def _to_carrier(arr: np.ndarray, name: str) -> np.ndarray:
    if name not in BOUNDARY_TYPES:
        return arr
    carrier, _, op = BOUNDARY_TYPES[name]
    want = np.uint8 if carrier == "u8" else np.int8 if carrier == "s8" else np.float32
    return arr.view(want) if op == "bitcast_convert" else arr.astype(want)


def _from_carrier(arr: np.ndarray, shape) -> np.ndarray:
    want = np.dtype(shape.numpy_dtype())
    if arr.dtype == want:
        return arr
    name = _type_name(shape)
    if name in BOUNDARY_TYPES and BOUNDARY_TYPES[name][2] == "bitcast_convert":
        return arr.view(want)
    return arr.astype(want)


#: jaxlib's CPU custom-call targets (LAPACK kernels as jnp.linalg lowers): TF's XLA has
#: no handler for them ("No FFI handler registered for lapack_spotrf_ffi")
_JAXLIB_FFI_RE = re.compile(r'custom_call_target="((?:lapack_\w+_ffi)|tridiagonal_solve_perturbed_ffi)"')


def _portable(proto: bytes, in_types: list[str], out_types: list[str]) -> bytes:
    """The portable StableHLO artifact of an HLO module proto whose entry takes and
    returns leaves of the HLO element types ``in_types`` / ``out_types``: jaxlib's
    conversion, ``main`` wrapped for the boundary types, serialized for TARGET_VERSION."""
    _xc, _jaxmod = _jaxlib()
    try:
        bytecode = _jaxmod.mlir.hlo_to_stablehlo(proto)
    except Exception as e:
        raise OracleError(f"XLA could not convert the module to StableHLO: "
                          f"{_message(e)}") from e
    if any(n in BOUNDARY_TYPES for n in in_types + out_types):
        try:
            bytecode = _wrap_main(bytecode, in_types, out_types)
        except OracleError:
            raise
        except Exception as e:
            raise OracleError(f"could not wrap main for the TF boundary types: "
                              f"{_message(e)}") from e
    try:
        return _jaxmod.mlir.serialize_portable_artifact(bytecode, TARGET_VERSION)
    except Exception as e:
        m = _MHLO_ONLY_RE.search(str(e))
        if m:  # an op with no StableHLO form (ragged-dot, stochastic-convert...)
            raise OracleUnsupported(f"TF oracle cannot express {m.group(1)}: it has no "
                                    f"portable StableHLO form, and XlaCallModule takes only "
                                    f"portable StableHLO") from e
        raise OracleError(f"could not serialize the StableHLO module for version "
                          f"{TARGET_VERSION}: {_message(e)}") from e


def tf_stablehlo(text: str) -> tuple[bytes, list[str], list[str]]:
    """What TensorFlow is handed for the HLO ``text``, without importing TensorFlow:
    ``(artifact, in_types, out_types)``, the portable StableHLO artifact XlaCallModule
    runs and the HLO element types of the entry's input and output leaves (flattened).
    A leaf whose type is in :data:`BOUNDARY_TYPES` crosses as its carrier type
    (``_to_carrier``'s conversion). Raises as :class:`TfExecutable` does."""
    xc, _jaxmod = _jaxlib()
    proto, params, result = load_program(text, xc, "TF oracle", UNSUPPORTED_TYPES)
    in_types = [_type_name(s) for p in params for s in _leaves(p, [])]
    out_types = [_type_name(s) for s in _leaves(result, [])]
    return _portable(proto, in_types, out_types), in_types, out_types


class TfExecutable(OracleExecutable):
    """An HLO module compiled by TensorFlow's XLA (through XlaCallModule)."""

    def __init__(self, text: str, debug_options: dict | None = None):
        super().__init__(text, debug_options)
        if self.debug_options:
            raise OracleUnsupported("TF oracle cannot set XLA debug options per module (TF reads "
                                    "them once from XLA_FLAGS); got "
                                    + ", ".join(sorted(self.debug_options)))
        m = _JAXLIB_FFI_RE.search(text)
        if m:
            raise OracleUnsupported(
                f"TF oracle cannot run jaxlib's own custom call {m.group(1)}: TensorFlow "
                f"registers no FFI handler for it (use the XLA oracle)")
        xc, _jaxmod = _jaxlib()
        proto, self.parameter_shapes, self.result_shape = load_program(
            text, xc, "TF oracle", UNSUPPORTED_TYPES)
        self._in_leaves = [s for p in self.parameter_shapes for s in _leaves(p, [])]
        self._out_leaves = _leaves(self.result_shape, [])
        st = _tf()
        tf = st["tf"]
        self._in_types = [_type_name(s) for s in self._in_leaves]
        self._out_types = [_type_name(s) for s in self._out_leaves]
        in_dtypes = [_tf_dtype(_carrier(n)) for n in self._in_types]
        out_dtypes = [_tf_dtype(_carrier(n)) for n in self._out_types]
        self.wrapped = any(n in BOUNDARY_TYPES for n in self._in_types + self._out_types)
        self._artifact = _portable(proto, self._in_types, self._out_types)
        self._specs = [tf.TensorSpec(tuple(s.dimensions()), dt)
                       for s, dt in zip(self._in_leaves, in_dtypes)]
        tfxla = st["tfxla"]
        attrs = dict(version=st["call_version"], module=self._artifact, Tout=out_dtypes,
                     Sout=[tuple(s.dimensions()) for s in self._out_leaves],
                     platforms=["CPU"], function_list=[], has_token_input_output=False)
        if st["call_version"] >= 6:
            attrs["disabled_checks"] = []

        def call(*xs):
            return tfxla.call_module(list(xs), **attrs)

        self._fn = tf.function(call, jit_compile=True, autograph=False,
                               input_signature=self._specs, reduce_retracing=True)
        try:
            with tf.device("/CPU:0"):
                self._concrete = self._fn.get_concrete_function()
        except Exception as e:
            raise OracleError(f"TF rejected the StableHLO module (XlaCallModule): "
                              f"{_message(e)}") from e
        self._compiled = False

    # -- running -------------------------------------------------------------------------

    def _flat_args(self, args) -> list[np.ndarray]:
        if len(args) != len(self.parameter_shapes):
            raise OracleError(f"module takes {len(self.parameter_shapes)} argument(s), "
                              f"got {len(args)}")
        flat: list[np.ndarray] = []
        for i, (a, s) in enumerate(zip(args, self.parameter_shapes)):
            flatten_argument(a, s, f"argument {i}", flat)
        return flat

    def run(self, *args):
        """Execute on numpy ``args`` (tuples for tuple-shaped parameters).

        Returns a numpy array, or a nested tuple of them for a tuple-shaped result.
        The first call compiles (TF compiles lazily, at the first execution).
        """
        flat = [_to_carrier(a, n) for a, n in zip(self._flat_args(args), self._in_types)]
        tf = _state["tf"]
        try:
            with tf.device("/CPU:0"):
                tensors = [tf.constant(a) for a in flat]
                outs = self._fn(*tensors)
                leaves = [np.asarray(o.numpy()) for o in outs]
        except Exception as e:
            raise OracleError(f"TF's XLA failed to {'run' if self._compiled else 'compile'} the "
                              f"module: {_message(e)}") from e
        self._compiled = True
        if len(leaves) != len(self._out_leaves):  # pragma: no cover - defensive
            raise OracleError(f"TF returned {len(leaves)} values for a result with "
                              f"{len(self._out_leaves)} leaves")
        leaves = [_from_carrier(a, s) for a, s in zip(leaves, self._out_leaves)]
        it = iter(leaves)
        return rebuild_result(self.result_shape, it)

    __call__ = run

    def _compiler_ir(self, stage: str) -> str | None:
        tf = _state["tf"]
        try:
            with tf.device("/CPU:0"):
                return self._fn.experimental_get_compiler_ir(*self._specs)(stage=stage)
        except Exception:
            pass
        try:  # older TF wants concrete values
            with tf.device("/CPU:0"):
                zeros = [tf.zeros(s.shape, s.dtype) for s in self._specs]
                return self._fn.experimental_get_compiler_ir(*zeros)(stage=stage)
        except Exception:
            return None

    def optimized_hlo(self) -> str | None:
        """The HLO text of the module after TF's XLA optimization passes (None when TF
        would not say)."""
        if not hasattr(self, "_optimized"):  # TF compiles again to answer: keep the answer
            self._optimized = self._compiler_ir("optimized_hlo")
        return self._optimized

    def tf_hlo(self) -> str | None:
        """The HLO module TF handed to its XLA (before XLA's passes)."""
        return self._compiler_ir("hlo")






# -- module-level API ------------------------------------------------------------------


_cache = ExecutableCache(lambda text, options: TfExecutable(text, options), CACHE_SIZE)


def compile_hlo(text: str, *, debug_options: dict | None = None) -> TfExecutable:
    """Prepare HLO text for TF's XLA (cached: the last ``CACHE_SIZE`` modules are kept).

    TF compiles at the first ``run``; errors from XLA's compiler surface there as
    :class:`OracleError`. Raises :class:`OracleUnsupported` for what this oracle cannot
    express (element types, tokens, bitcast, per-module debug options).
    """
    return _cache.get(text, debug_options)


def run_hlo(text: str, *args, debug_options: dict | None = None):
    """``compile_hlo(text).run(*args)``."""
    return compile_hlo(text, debug_options=debug_options).run(*args)


# -- path 2: TF programs in, TF's HLO out ------------------------------------------------


def tf_modules():
    """``(tf, tfxla, xla_data_pb2)``: TensorFlow, its ``tf2xla`` op wrappers
    (``tensorflow.compiler.tf2xla.python.xla``: dot_general, conv, reduce_window, gather,
    scatter, sort, variadic_sort, optimization_barrier...) and the XLA protos their
    dimension-number arguments take; for writing ``native_module`` programs."""
    st = _tf()
    from tensorflow.compiler.xla import xla_data_pb2
    return st["tf"], st["tfxla"], xla_data_pb2


def native_function(fn):
    """``tf.function(fn, jit_compile=True)`` (TF imported on first use)."""
    tf = _tf()["tf"]
    return tf.function(fn, jit_compile=True, autograph=False)


def _to_numpy(value):
    tf = _state["tf"]
    if isinstance(value, (tuple, list)):
        return tuple(_to_numpy(v) for v in value)
    if isinstance(value, tf.Tensor):
        return np.asarray(value.numpy())
    return np.asarray(value)


def native_module(fn, *args, stage: str = "hlo"):
    """Compile the TF program ``fn`` (a Python function of TF ops, or a ``tf.function``)
    with ``jit_compile=True`` on numpy ``args``.

    Returns ``(hlo_text, value)``: the HLO module TF hands its XLA (``stage="hlo"``; or
    ``"optimized_hlo"``) and TF's result as numpy (a tuple of arrays when ``fn`` returns a
    tuple/list). TF's entry takes one parameter per argument, in order; it returns a bare
    array for a single result and a tuple otherwise, so ``hloref.evaluate(hlo_text, *args)``
    has the structure of ``value``.
    """
    st = _tf()
    tf = st["tf"]
    f = fn if hasattr(fn, "experimental_get_compiler_ir") else native_function(fn)
    try:
        with tf.device("/CPU:0"):
            tensors = [tf.constant(np.asarray(a)) for a in args]
            value = _to_numpy(f(*tensors))
            text = f.experimental_get_compiler_ir(*tensors)(stage=stage)
    except Exception as e:
        raise OracleError(f"TF could not compile the program: {_message(e)}") from e
    return text, value
