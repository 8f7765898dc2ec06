"""The public evaluation API: ``evaluate``, ``supported_opcodes``, argument checking."""

from __future__ import annotations

import numpy as np

from .arguments import coerce_argument
from .errors import HloEvalError
from .ir import Module
from .shapes import ArrayShape, Shape

__all__ = ["evaluate", "compile_module", "Compiled", "verified", "supported_opcodes",
           "coerce_argument", "BACKENDS"]

BACKENDS = ("cpu", "gpu")


def _module(module_or_text) -> Module:
    if isinstance(module_or_text, Module):
        return module_or_text
    if isinstance(module_or_text, str):
        from . import parse
        return parse(module_or_text)
    raise TypeError(f"expected an hloref Module or HLO text, got {type(module_or_text).__name__}")


def verified(module: Module) -> Module:
    """``module`` after ``verify_module`` (``HloVerifyError`` on the first problem); a
    module object is verified once, however often it is evaluated (a module edited in
    place afterwards is not verified again)."""
    if not getattr(module, "_hloref_verified", False):
        from .verifier import verify_module
        verify_module(module)
        object.__setattr__(module, "_hloref_verified", True)
    return module


def evaluate(module_or_text, *args, backend: str = "cpu", limits=None, infeed=None,
             outfeed=None, host_recv=None, host_send=None, fallback: bool = True,
             interpreter_options=None, verify: bool = True):
    """Evaluate the entry computation of a module on ``args`` (one per parameter).

    A module that runs on N = replica_count × num_partitions > 1 devices takes, for
    each parameter, a sequence of N per-device values (device d = replica ×
    num_partitions + partition) and returns a list of N per-device results.

    ``infeed`` (values consumed in order by ``infeed``), ``outfeed`` (a list that
    ``outfeed`` appends to), ``host_recv``/``host_send`` (dicts channel id → list, for
    ``recv``/``send`` with ``is_host_transfer=true``) are the caller's queues; with
    several devices, give one per device in a list. ``fallback`` (gpu backend): run ops
    without a GPU kernel on the CPU (with a warning naming each); ``False`` raises
    ``HloUnsupportedError`` instead.

    A parameter with bounded dynamic dimensions (``f32[<=8]``) takes an array shorter
    than the bound there: its extent is the runtime size. A result with runtime sizes
    below its bounds comes back cut to them (both backends).

    ``interpreter_options(device)`` (cpu backend): extra ``Interpreter`` keyword
    arguments per device, for hooks such as the numerical envelope's ``perturb``.

    The module is verified first (``hloref.verifier``: shapes, operand counts,
    attributes, as XLA's HloVerifier checks them; once per module object), so a module
    XLA would reject is refused (``HloVerifyError`` naming the instruction and what was
    expected) instead of evaluated; ``verify=False`` evaluates it as written (``hloref
    run --no-verify`` likewise)."""
    module = module_or_text if type(module_or_text) is Module else _module(module_or_text)
    if verify and not getattr(module, "_hloref_verified", False):
        verified(module)
    if backend == "cpu" and interpreter_options is None and infeed is None and \
            outfeed is None and host_recv is None and host_send is None:
        # the common call (one device, arrays as the parameters want them): what the
        # general path below does with them, its checks made against the module's
        # record (``Interpreter.run_ready``)
        interpreter, not_ready = _interpreter()
        result = interpreter(module, limits=limits).run_ready(args)
        if result is not not_ready:
            return result
    if backend not in BACKENDS:
        raise HloEvalError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    params = module.entry.parameters
    if len(args) != len(params):
        raise HloEvalError(f"the entry computation {module.entry.name} takes {len(params)} "
                           f"arguments, got {len(args)}")
    from hloref.evaluator.collectives import DeviceIO, run_devices, single_device
    n = module.replica_count * module.num_partitions
    if n > 1:
        for i, a in enumerate(args):
            if not isinstance(a, (list, tuple)) or len(a) != n:
                raise HloEvalError(f"argument {i}: the module runs on {n} devices: give a list "
                                   f"of {n} per-device values")
        per_device = [[coerce_argument(a[d], p.shape, f"argument {i} (%{p.name}) on device {d}")
                       for i, (a, p) in enumerate(zip(args, params))] for d in range(n)]

        def pick(q, d):
            return q[d] if isinstance(q, list) and len(q) == n else None

        def mine(q, d, empty):  # the caller's own (possibly empty) queue, else a new one
            got = pick(q, d)
            return empty() if got is None else got

        ios = [DeviceIO(infeed=_deque(pick(infeed, d)), outfeed=mine(outfeed, d, list),
                        host_recv=mine(host_recv, d, dict), host_send=mine(host_send, d, dict))
               for d in range(n)]
        if backend == "gpu":
            from hloref import gpu
            if not gpu.is_available():
                raise HloEvalError(gpu.unavailable_reason())
            from hloref.gpu.collectives import run_devices as run_gpu_devices
            from hloref.gpu.interpreter import FallbackReport
            reports: list = []
            try:
                return run_gpu_devices(module, per_device, limits=limits, io=ios,
                                       fallback=fallback, reports=reports)
            finally:
                total = FallbackReport()  # every device's fallbacks, as hloref.gpu.last_report
                for r in reports:
                    for op_name, count in r.counts.items():
                        total.counts[op_name] += count
                        total.reasons.setdefault(op_name, r.reasons[op_name])
                gpu.last_report = total
        return run_devices(module, per_device, limits=limits, io=ios,
                           interpreter_options=interpreter_options)
    values, sizes = [], []
    for i, (a, p) in enumerate(zip(args, params)):
        a, s = _bounded_argument(a, p.shape)
        values.append(coerce_argument(a, p.shape, f"argument {i} (%{p.name})"))
        sizes.append(s)
    dynamic = any(s is not None for s in sizes)
    queues = infeed is not None or outfeed is not None or host_recv is not None or \
        host_send is not None
    io = DeviceIO(infeed=_deque(infeed), outfeed=outfeed if outfeed is not None else [],
                  host_recv=host_recv if host_recv is not None else {},
                  host_send=host_send if host_send is not None else {}) \
        if queues or backend == "gpu" else None
    if backend == "gpu":
        from hloref.gpu import evaluate_gpu
        return evaluate_gpu(module, values, limits=limits, fallback=fallback, io=io,
                            sizes=sizes if dynamic else None)
    from hloref.evaluator.interpreter import Interpreter
    interp = Interpreter(module, limits=limits, backend=backend,
                         **(interpreter_options(0) if interpreter_options else {}))
    if io is not None:  # else the first op that needs one makes it (collectives.device_of)
        interp.device = single_device(io)
    return interp.run(values, sizes if dynamic else None)


class Compiled:
    """A module prepared once for repeated evaluation (``hloref.compile``): verified,
    planned, its record (``evaluator/plan_cache.py``) and parameter types taken once.
    ``compiled(*args)`` is ``evaluate(module, *args, limits=limits, verify=verify)`` for
    the module as it was when compiled: the module is not compared with its snapshot
    again (about 1 µs a call for a three-instruction module, 0.3 µs per instruction),
    so a module edited in place afterwards must be compiled again. Arguments that
    are not C-ordered arrays of the parameters' static shapes and types (and
    multi-device modules) take ``evaluate``'s general path, which checks the module."""

    __slots__ = ("module", "limits", "verify", "_record")

    def __init__(self, module_or_text, *, limits=None, verify: bool = True):
        module = _module(module_or_text)
        if verify:
            verified(module)
        self.module, self.limits, self.verify = module, limits, verify
        interpreter, _ = _interpreter()
        self._record = interpreter(module, limits=limits).prepare()

    def __call__(self, *args):
        interpreter, not_ready = _interpreter()
        if self._record is not None:  # the record as compiled, not checked again
            result = interpreter(self.module, limits=self.limits,
                                 record=self._record).run_ready(args)
            if result is not not_ready:
                return result
        return evaluate(self.module, *args, limits=self.limits, verify=self.verify)


def compile_module(module_or_text, *, limits=None, verify: bool = True) -> Compiled:
    """``Compiled(module_or_text, limits=..., verify=...)``: ``hloref.compile``."""
    return Compiled(module_or_text, limits=limits, verify=verify)


_INTERPRETER: list = []


def _interpreter():
    """``(evaluator.interpreter.Interpreter, its NOT_READY)``, imported once (an import
    statement costs about 1 µs a call)."""
    if not _INTERPRETER:
        from hloref.evaluator.interpreter import NOT_READY, Interpreter
        _INTERPRETER.append((Interpreter, NOT_READY))
    return _INTERPRETER[0]


def _bounded_argument(value, shape: Shape):
    """An argument for a parameter with bounded dynamic dimensions (``f32[<=8]``) may be
    shorter than the bound in those dimensions: its extent is the runtime size. Returns
    ``(value padded to the bound, runtime sizes or None)``; anything else is returned
    unchanged for ``coerce_argument`` to check."""
    if not isinstance(shape, ArrayShape) or not any(shape.dynamic):
        return value, None
    if not isinstance(value, np.ndarray):
        if isinstance(value, (tuple, list)) or np.ndim(value) == len(shape.dims):
            try:
                value = np.asarray(value, dtype=shape.element_type.dtype)
            except (TypeError, ValueError, OverflowError):
                return value, None
        else:
            return value, None
    from hloref.evaluator.dynamic import entry_sizes
    return entry_sizes(value, shape)


def _deque(values):
    from collections import deque
    return deque(values or ())


def supported_opcodes(backend: str = "cpu") -> frozenset[str]:
    from hloref.evaluator.registry import INTERPRETER_OPCODES, load_all
    if backend == "cpu":
        return frozenset(load_all()) | INTERPRETER_OPCODES
    if backend == "gpu":
        from hloref.gpu import supported_opcodes as gpu_supported
        return frozenset(gpu_supported())
    raise ValueError(f"unknown backend {backend!r}")
