"""XLA:CPU as an oracle, in-process through jaxlib.

Pipeline (jaxlib 0.10.2)::

    HLO text --xla_client.hlo.hlo_module_from_text--> HloModule
             --jaxlib._jax.mlir.hlo_to_stablehlo-->   StableHLO bytecode
             --Client.compile_and_load-->             LoadedExecutable (XLA:CPU)

``compile_hlo(text)`` returns an :class:`XlaExecutable` (compiled executables are
cached, LRU, keyed by a hash of the text and the debug options);
``XlaExecutable.run(*args)`` returns values in hloref's convention: a numpy array for an
array-shaped result, a (nested) Python tuple of them for a tuple-shaped result.
``run_hlo(text, *args)`` does both.

Calling convention (checked against jaxlib 0.10.2)
---------------------------------------------------
* ``LoadedExecutable.execute`` takes and returns *flat* buffer lists: tuple-shaped entry
  parameters are flattened leaf by leaf (the optimized module's entry has one parameter per
  leaf), and a tuple-shaped root comes back as its leaves in order. This module flattens
  tuple arguments (pass Python tuples/lists, nested as the parameter shape is) and rebuilds
  the result nesting from the module's program shape, so callers never see the flattening.
* The module goes through StableHLO and back, so the *entry layout* and other module-level
  details (``entry_computation_layout``, ``input_output_alias``, schedules...) are not kept:
  XLA compiles for default (major-to-minor) layouts. Values are layout-independent, so the
  results are unaffected (checked: a module with ``{0,1}`` layouts everywhere gives the same
  values); ``optimized_hlo()`` shows what XLA actually compiled.
* 64-bit types (s64, u64, f64, c128) are transferred inside ``jax.enable_x64(True)``
  (a thread-local context), so JAX's 32-bit canonicalization never narrows them.

Element types
-------------
Arguments must be numpy arrays (or scalars) whose dtype is exactly the parameter's element
type (ml_dtypes for the narrow ones); results come back with the module's element types.
Round-tripped through parameter -> convert -> result on XLA:CPU (jaxlib 0.10.2):

* work: pred, s2, s4, s8, s16, s32, s64, u2, u4, u8, u16, u32, u64, f16, bf16, f32, f64,
  c64, c128, f8e4m3fn, f8e5m2, f8e4m3fnuz, f8e5m2fnuz, f8e4m3b11fnuz, f8e4m3, f8e3m4,
  f8e8m0fnu, f4e2m1fn.
* raise :class:`OracleUnsupported` (detected before anything is compiled):

  - ``s1`` / ``u1``: hlo_to_stablehlo maps them to ``i1``, i.e. ``pred``; s1 parameters are
    then rejected at execute time ("expected pred[5] ... got s1[5]") and u1 converts fail
    StableHLO verification.
  - ``f6e2m3fn`` / ``f6e3m2fn``: XLA:CPU's fusion emitter crashes while generating code
    ("Invalid bitcast i6 to i8" / RET_CHECK in fusion_compiler.cc).
  - the ``bitcast`` opcode (``bitcast-convert`` is fine): layouts do not survive the trip
    through StableHLO, and XLA rejects a bitcast before layout assignment ("Unexpected bitcast
    operation seen during layout assignment" or a minor_to_major size error).
  - ``token[]`` parameters or results (no token buffers can be made or read from Python
    here: "Cannot convert a token-shape buffer to a numpy array").

Denormals
---------
XLA:CPU flushes subnormals to zero *at run time* (the PJRT CPU client runs every
computation with FTZ/DAZ set), e.g. ``multiply(f32 1e-39, 1.0)`` gives ``0``. Neither
``xla_cpu_ftz=false`` nor fast-math flags change that in jaxlib 0.10.2 (checked), so
differential tests on floating-point values must treat subnormals as zero when comparing
against XLA:CPU.

Debug options
-------------
``compile_hlo(text, debug_options={...})``: names that ``ExecutableBuildOptions.debug_options``
exposes as attributes (``xla_backend_optimization_level``, ``xla_cpu_enable_fast_math``,
``xla_cpu_fast_math_honor_nans``, ``xla_disable_hlo_passes``, ...) are set there; any other
name is passed through ``CompileOptions.env_option_overrides`` (the route
``jax.jit(...).lower(...).compile(compiler_options=...)`` takes), which XLA validates: an unknown
name raises :class:`OracleError` ("No such compile option"). Defaults are left alone when
``debug_options`` is not given.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from .errors import OracleError, OracleUnsupported

__all__ = ["XlaExecutable", "compile_hlo", "run_hlo", "available", "clear_cache", "device_counts",
           "OracleError", "OracleUnsupported", "UNSUPPORTED_TYPES", "CACHE_SIZE"]

#: Element types XLA:CPU cannot be asked about through this route, with the reason.
UNSUPPORTED_TYPES: dict[str, str] = {
    "s1": "hlo_to_stablehlo maps s1 to i1 (pred); XLA:CPU then rejects s1 buffers",
    "u1": "hlo_to_stablehlo maps u1 to i1 (pred); StableHLO verification fails",
    "f6e2m3fn": "XLA:CPU codegen crashes on f6 types (invalid bitcast i6 to i8)",
    "f6e3m2fn": "XLA:CPU codegen crashes on f6 types (invalid bitcast i6 to i8)",
}
# mesh-axes replica groups with an explicit device order: mesh[...], device_ids=(...)
_MESH_DEVICE_IDS_RE = re.compile(r"replica_groups=mesh\[[^\]]*\]\s*,\s*device_ids=")
# ``bitcast`` as an opcode (after a shape), not ``bitcast-convert``.
_BITCAST_RE = re.compile(r"[\]})]\s+bitcast\(")

#: How many compiled executables the LRU cache keeps.
CACHE_SIZE = 64

_jax_state: dict[str, Any] = {}


def _jax():
    """Import jax/jaxlib lazily; returns (jax, xla_client, _jax, backend, device)."""
    if not _jax_state:
        try:
            import jax
            import jaxlib._jax as _jaxmod
            from jax.extend import backend as jb
            from jaxlib import xla_client as xc
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise OracleUnsupported(f"the XLA oracle needs jax/jaxlib: {e}") from e
        be = jb.get_backend("cpu")
        _initialize_lapack()
        _jax_state.update(jax=jax, xc=xc, _jax=_jaxmod, backend=be, device=be.local_devices()[0])
    s = _jax_state
    return s["jax"], s["xc"], s["_jax"], s["backend"], s["device"]


def _initialize_lapack() -> None:
    """Fill jaxlib's table of LAPACK routines (taken from SciPy's) that its
    ``lapack_*_ffi`` custom-call handlers call. jax does it when it first lowers a linear
    algebra op (``jax._src.lax.linalg.initialize_lapack``); a module compiled from text
    never lowers one, and its Cholesky, LU or triangular solve then calls a null
    pointer: the oracle process dies with SIGSEGV (seen on ``jnp.linalg.cholesky``)."""
    try:
        from jaxlib import lapack
        lapack._lapack.initialize()
    except Exception:  # noqa: BLE001 - an older or newer jaxlib: its own business
        pass


def available() -> bool:
    """True when jax/jaxlib import and a CPU backend exists."""
    return loads(_jax)


def loads(*loaders) -> bool:
    """True when every one of ``loaders`` (an oracle's lazy importers) runs without error:
    the ``available()`` of the XLA and TF oracles."""
    try:
        for load in loaders:
            load()
        return True
    except Exception:
        return False


def clear_cache() -> None:
    """Drop every cached executable."""
    _cache.clear()


def _message(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def xla_shape_text(shape) -> str:
    """An XLA (xla_client) shape as text for messages."""
    try:
        return str(shape)
    except Exception:  # pragma: no cover
        return repr(shape)


def load_program(text: str, xc, who: str, unsupported_types: dict[str, str]):
    """Checks and parsing shared by the jaxlib-based oracles: refuse element types and
    opcodes the oracle cannot run, parse with XLA, read the program shape, refuse tokens.

    Returns ``(serialized HloModuleProto, parameter shapes, result shape)``."""
    pattern = re.compile(r"(?<![\w.%-])(" + "|".join(unsupported_types) + r")\[")
    m = pattern.search(text)
    if m:
        t = m.group(1)
        raise OracleUnsupported(f"{who} does not support element type {t}: "
                                f"{unsupported_types[t]}")
    if _MESH_DEVICE_IDS_RE.search(text):
        raise OracleUnsupported(f"{who} cannot run replica groups over a mesh with device_ids: "
                                "the StableHLO route drops them (the optimized module prints "
                                "the mesh without its device order)")
    if _BITCAST_RE.search(text):
        raise OracleUnsupported(f"{who} cannot compile `bitcast`: layouts are lost on the way "
                                "through StableHLO and XLA rejects bitcast before layout "
                                "assignment")
    try:
        hm = xc.hlo.hlo_module_from_text(text)
    except Exception as e:
        raise OracleError(f"XLA could not parse the module: {_message(e)}") from e
    proto = hm.as_serialized_hlo_module_proto()
    try:
        ps = xc.XlaComputation(proto).program_shape()
        parameter_shapes = tuple(ps.parameter_shapes())
        result_shape = ps.result_shape()
    except Exception as e:
        raise OracleError(f"XLA could not compute the program shape: {_message(e)}") from e
    for i, sh in enumerate(parameter_shapes):
        if _has_token(sh):
            raise OracleUnsupported(f"{who} cannot pass token parameters "
                                    f"(parameter {i}: {xla_shape_text(sh)})")
    if _has_token(result_shape):
        raise OracleUnsupported(f"{who} cannot return tokens (result shape "
                                f"{xla_shape_text(result_shape)})")
    return proto, parameter_shapes, result_shape


class OracleExecutable:
    """What the XLA:CPU and TF oracles' executables share: the module ``text``, the
    ``debug_options`` it was compiled with, its XLA program shape (``parameter_shapes``,
    ``result_shape``: filled in by the subclass from :func:`load_program`) and the repr."""

    def __init__(self, text: str, debug_options: dict | None = None):
        self.text = text
        self.debug_options = dict(debug_options or {})
        self.parameter_shapes: tuple = ()
        self.result_shape = None

    def __repr__(self) -> str:
        params = ", ".join(xla_shape_text(s) for s in self.parameter_shapes)
        return f"<{type(self).__name__} ({params}) -> {xla_shape_text(self.result_shape)}>"


class XlaExecutable(OracleExecutable):
    """An HLO module compiled by XLA:CPU; ``run(*args)`` executes it."""

    def __init__(self, text: str, debug_options: dict | None = None):
        super().__init__(text, debug_options)
        jax, xc, _jaxmod, be, dev = _jax()
        self._device = dev
        self.replicas, self.partitions = device_counts(text)
        n = self.replicas * self.partitions
        self._devices = [dev]
        if n > 1:
            have = be.local_devices()
            if len(have) < n:
                raise OracleUnsupported(
                    f"the module runs on {n} devices (replica_count={self.replicas}, "
                    f"num_partitions={self.partitions}) and XLA:CPU here has {len(have)}: "
                    f"start the process with XLA_FLAGS=--xla_force_host_platform_device_count"
                    f"={n} (before jax is imported)")
            self._devices = list(have[:n])
        proto, self.parameter_shapes, self.result_shape = load_program(
            text, xc, "XLA:CPU oracle", UNSUPPORTED_TYPES)
        try:
            mlir = _jaxmod.mlir.hlo_to_stablehlo(proto)
        except Exception as e:
            raise OracleError(f"XLA could not convert the module to StableHLO: "
                              f"{_message(e)}") from e
        opts = xc.CompileOptions()
        overrides = []
        dbg = opts.executable_build_options.debug_options
        for name, value in self.debug_options.items():
            if hasattr(dbg, name):
                try:
                    setattr(dbg, name, value)
                except Exception as e:
                    raise OracleError(f"bad value for debug option {name}={value!r}: "
                                      f"{_message(e)}") from e
            else:
                overrides.append((name, value))
        if overrides:
            opts.env_option_overrides = overrides
        if n > 1:
            opts.num_replicas, opts.num_partitions = self.replicas, self.partitions
            if self.partitions > 1:
                # XLA refuses num_partitions > 1 without SPMD partitioning, whose pass
                # refuses `partition-id`: the module is taken as written, per device
                # (as hloref evaluates it; sharding annotations are not partitioned)
                opts.executable_build_options.use_spmd_partitioning = True
                passes = [p for p in str(getattr(dbg, "xla_disable_hlo_passes", "") or "")
                          .split(",") if p]
                dbg.xla_disable_hlo_passes = ",".join(passes + ["spmd-partitioning"])
            opts.device_assignment = xc.DeviceAssignment.create(
                np.array([d.id for d in self._devices]).reshape(self.replicas, self.partitions))
        try:
            with jax.enable_x64(True):
                self._exe = be.compile_and_load(mlir, self._devices, opts)
        except Exception as e:
            raise OracleError(f"XLA:CPU failed to compile the module: {_message(e)}") from e

    # -- running -------------------------------------------------------------------------

    def run(self, *args):
        """Execute on numpy ``args`` (tuples for tuple-shaped parameters).

        Returns a numpy array, or a nested tuple of them for a tuple-shaped result. A
        module on N > 1 devices (``replica_count`` × ``num_partitions``) takes, as
        ``hloref.evaluate`` does, a sequence of N per-device values for each parameter
        (device d = replica × num_partitions + partition) and returns a list of the N
        per-device results.
        """
        if len(args) != len(self.parameter_shapes):
            raise OracleError(f"module takes {len(self.parameter_shapes)} argument(s), "
                              f"got {len(args)}")
        if len(self._devices) > 1:
            return self._run_devices(args)
        flat: list[np.ndarray] = []
        for i, (a, s) in enumerate(zip(args, self.parameter_shapes)):
            flatten_argument(a, s, f"argument {i}", flat)
        jax = _jax_state["jax"]
        try:
            with jax.enable_x64(True):
                # copies: XLA:CPU may take a host array zero-copy and write into it (an
                # aliased or donated buffer); the caller's inputs must stay as they were
                bufs = [jax.device_put(np.array(a, copy=True), self._device) for a in flat]
                outs = self._exe.execute(bufs)
                leaves = [np.array(o) for o in outs]
        except Exception as e:
            raise OracleError(f"XLA:CPU failed to run the module: {_message(e)}") from e
        it = iter(leaves)
        value = rebuild_result(self.result_shape, it)
        rest = sum(1 for _ in it)
        if rest:  # pragma: no cover - would mean the flattening convention changed
            raise OracleError(f"XLA:CPU returned {len(leaves)} buffers, {rest} more than the "
                              f"result shape {xla_shape_text(self.result_shape)} has leaves")
        return value

    __call__ = run

    def _run_devices(self, args) -> list:
        """One SPMD execution: device d's buffers are its own values (an ``Array`` of
        single-device shards; the global shape is not used by the executable)."""
        from jax._src import core
        from jax._src.array import ArrayImpl
        from jax.sharding import Mesh, NamedSharding, PartitionSpec
        n = len(self._devices)
        per_device: list[list[np.ndarray]] = [[] for _ in range(n)]
        for i, (a, s) in enumerate(zip(args, self.parameter_shapes)):
            if not isinstance(a, (tuple, list)) or len(a) != n:
                raise OracleError(f"argument {i}: the module runs on {n} devices: give a list "
                                  f"of {n} per-device values")
            for d in range(n):
                flatten_argument(a[d], s, f"argument {i} on device {d}", per_device[d])
        jax = _jax_state["jax"]
        sharding = NamedSharding(Mesh(np.array(self._devices), ("devices",)),
                                 PartitionSpec("devices"))
        try:
            with jax.enable_x64(True):
                arrays = []
                for j in range(len(per_device[0])):
                    shards = [jax.device_put(np.array(per_device[d][j], copy=True), dev)
                              for d, dev in enumerate(self._devices)]
                    leaf = per_device[0][j]
                    aval = core.ShapedArray((n,) + leaf.shape, leaf.dtype)
                    arrays.append(ArrayImpl(aval, sharding, shards, committed=True,
                                            _skip_checks=True))
                outs = self._exe.execute_sharded(arrays).disassemble_into_single_device_arrays()
                leaves = [[np.array(o[d]) for o in outs] for d in range(n)]
        except Exception as e:
            raise OracleError(f"XLA:CPU failed to run the module: {_message(e)}") from e
        return [rebuild_result(self.result_shape, iter(device_leaves)) for device_leaves in leaves]

    def compiled_memory_stats(self):
        """``memory_analysis()``'s ``CompiledMemoryStats``."""
        return self._exe.get_compiled_memory_stats()

    def optimized_hlo(self) -> str:
        """The HLO text of the module after XLA:CPU's optimization passes (constants in
        full, so that the text can be evaluated)."""
        xc = _jax_state["xc"]
        options = xc.hlo.HloPrintOptions()
        options.print_large_constants = True
        return self._exe.hlo_modules()[0].to_string(options)


_DEVICE_COUNTS_RE = re.compile(r"\b(replica_count|num_partitions)\s*=\s*(\d+)")


def device_counts(text: str) -> tuple[int, int]:
    """``(replica_count, num_partitions)`` of the ``HloModule`` header (1 when absent)."""
    counts = {"replica_count": 1, "num_partitions": 1}
    header = text.split("ENTRY", 1)[0] if "ENTRY" in text else text
    for key, value in _DEVICE_COUNTS_RE.findall(header.split("\n%", 1)[0]):
        counts[key] = int(value)
    return counts["replica_count"], counts["num_partitions"]


def _has_token(shape) -> bool:
    if shape.is_tuple():
        return any(_has_token(s) for s in shape.tuple_shapes())
    return shape.is_token()


def flatten_argument(a, shape, where: str, out: list) -> None:
    """Append argument ``a``'s leaves (C-contiguous arrays) to ``out``, checked against
    the XLA parameter ``shape``; ``where`` names the argument in errors."""
    if shape.is_tuple():
        subs = shape.tuple_shapes()
        if not isinstance(a, (tuple, list)) or len(a) != len(subs):
            raise OracleError(f"{where}: expected a tuple of {len(subs)} for "
                              f"{xla_shape_text(shape)}, got {type(a).__name__}"
                              + (f" of {len(a)}" if isinstance(a, (tuple, list)) else ""))
        for j, (x, s) in enumerate(zip(a, subs)):
            flatten_argument(x, s, f"{where}[{j}]", out)
        return
    if not shape.is_array():
        raise OracleUnsupported(f"{where}: cannot pass a value of shape {xla_shape_text(shape)}")
    want = np.dtype(shape.numpy_dtype())
    dims = tuple(shape.dimensions())
    if isinstance(a, (tuple, list)):
        raise OracleError(f"{where}: expected an array for {xla_shape_text(shape)}, got a "
                          f"{type(a).__name__}")
    arr = np.asarray(a)
    if arr.dtype != want:
        raise OracleError(f"{where}: dtype {arr.dtype} does not match the parameter's "
                          f"element type ({xla_shape_text(shape)} wants {want})")
    if arr.shape != dims:
        raise OracleError(f"{where}: shape {arr.shape} does not match the parameter's "
                          f"dimensions {dims} ({xla_shape_text(shape)})")
    out.append(arr if arr.flags.c_contiguous else arr.copy(order="C"))


def rebuild_result(shape, leaves):
    """The result value of XLA ``shape`` (nested tuples) from an iterator of buffers."""
    if shape.is_tuple():
        return tuple(rebuild_result(s, leaves) for s in shape.tuple_shapes())
    try:
        leaf = next(leaves)
    except StopIteration:  # pragma: no cover
        raise OracleError("XLA:CPU returned fewer buffers than the result shape has leaves")
    if shape.is_array():
        want = np.dtype(shape.numpy_dtype())
        if leaf.dtype != want:  # pragma: no cover - defensive
            leaf = leaf.view(want) if leaf.dtype.itemsize == want.itemsize else leaf.astype(want)
    return leaf


# -- module-level API ------------------------------------------------------------------


class ExecutableCache:
    """An LRU cache of compiled executables keyed by HLO text and debug options, shared
    by the XLA and TF oracles: ``get(text, debug_options)`` returns the cached one or
    builds it with ``make(text, debug_options)``; the last ``size`` are kept."""

    def __init__(self, make, size: int):
        self._make = make
        self._size = size
        self._entries: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(text: str, debug_options: dict | None) -> str:
        h = hashlib.sha256(text.encode())
        if debug_options:
            h.update(repr(sorted(debug_options.items())).encode())
        return h.hexdigest()

    def get(self, text: str, debug_options: dict | None):
        key = self.key(text, debug_options)
        with self._lock:
            exe = self._entries.get(key)
            if exe is not None:
                self._entries.move_to_end(key)
                return exe
        exe = self._make(text, debug_options)  # outside the lock: compiling is slow
        with self._lock:
            self._entries[key] = exe
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return exe

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


_cache = ExecutableCache(lambda text, options: XlaExecutable(text, options), CACHE_SIZE)


def compile_hlo(text: str, *, debug_options: dict | None = None) -> XlaExecutable:
    """Compile HLO text with XLA:CPU (cached: the last ``CACHE_SIZE`` modules are kept).

    Raises :class:`OracleError` when XLA rejects the module (parse, conversion or compile
    error) and :class:`OracleUnsupported` for things this oracle cannot express.
    """
    return _cache.get(text, debug_options)


def run_hlo(text: str, *args, debug_options: dict | None = None):
    """``compile_hlo(text).run(*args)``."""
    return compile_hlo(text, debug_options=debug_options).run(*args)
