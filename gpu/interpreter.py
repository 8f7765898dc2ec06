"""The GPU interpreter: the CPU interpreter's loop with device-resident buffers.

``GpuInterpreter`` subclasses the CPU ``Interpreter`` and reuses its planning
(``_plan``: topological order, last uses, root; ``_prepare``: attribute unpacking and
``Called`` binding; ``_bind``). Values stay on the device for the whole evaluation,
across instructions and called computations: the entry arguments are copied to the
device once (``to_device``), the result back once (``to_host``). Control flow (call,
fusion, while, conditional) runs in this interpreter (``gpu/control.py``); the only
host reads are a while predicate per iteration, a conditional's selector, and the
predicate of a tuple ``select``.

Runtime dimension sizes (``set-dimension-size``, ``dynamic-reshape``) are tracked as on
the CPU (the same rules, ``evaluator/dynamic.py``): host-side ints beside the device
buffers, the data ops on the device (``gpu/dynamic.py``'s ``DEVICE_ARRAYS``).

An opcode without a GPU kernel (or a GPU op that raises ``GpuFallback`` for its
operands, e.g. complex element types) runs the CPU op: operands are copied to the
host, the CPU op function runs with its keyword arguments bound to a CPU
``Interpreter`` (so computations it calls, such as a sort comparator, run on the
CPU), the result is copied back. Each fallback is counted in ``report``; with
``fallback=False`` it raises ``HloUnsupportedError`` instead. The state the CPU's ops
keep on their interpreter (``evaluator.rng.INTERPRETER_STATE``: rng-get-and-update-state's
128-bit state, the ``rng`` stream's counter) is this interpreter's, lent to the CPU one for the
fallback and taken back after it, so a fallback advances the evaluation's one state as
the CPU backend does.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from hloref.errors import HloUnsupportedError
from hloref.evaluator.interpreter import Interpreter, Limits, PreparedStep, forwarded
from hloref.evaluator.rng import INTERPRETER_STATE

from .computation import LOOP_RUN, LoopRun
from .device import to_device, to_host
from .dynamic import DEVICE_ARRAYS
from .registry import GPU_OPS, GpuFallback, load_all as load_gpu_ops

__all__ = ["GpuInterpreter", "FallbackReport", "Limits"]


#: keyword arguments that ``evaluator.dynamic.dynamic_step`` replaces for an op evaluated
#: on a valid part, passed on to the op's CPU fallback
_SIZED_KEYWORDS = ("shape", "slice")



@dataclass
class FallbackReport:
    """Which opcodes ran on the CPU during an evaluation, how often, and why."""

    counts: Counter = field(default_factory=Counter)
    reasons: dict = field(default_factory=dict)

    def add(self, opcode: str, reason: str) -> bool:
        """Count one fallback; True the first time this opcode falls back."""
        first = opcode not in self.counts
        self.counts[opcode] += 1
        self.reasons.setdefault(opcode, reason)
        return first

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def __bool__(self) -> bool:
        return bool(self.counts)

    def __str__(self) -> str:
        if not self.counts:
            return "no CPU fallbacks"
        return "; ".join(f"{op} x{n} ({self.reasons[op]})" for op, n in sorted(self.counts.items()))


class GpuInterpreter(Interpreter):
    #: runtime dimension sizes: the CPU's rules, the data work on the device
    arrays = DEVICE_ARRAYS

    def __init__(self, module, *, limits: Limits | None = None, fallback: bool = True):
        super().__init__(module, limits=limits, backend="gpu")
        load_gpu_ops()
        self.fallback = fallback
        self.report = FallbackReport()
        #: runs the CPU op of a fallback, with computations it calls bound to the CPU
        self._cpu = Interpreter(module, limits=self.limits, backend="cpu")
        self.constants: dict[int, object] = {}  # id(instr) -> device value

    def attach_device(self, device) -> None:
        """Run as ``device`` (an ``evaluator.collectives.Device``): collectives and the
        CPU fallbacks (send/recv, feeds) rendezvous through its hub."""
        self.device = device
        self._cpu.device = device

    # The instruction loop (memory budget, last-use release, error naming) is the CPU
    # Interpreter's: values here are device arrays, whose ``nbytes`` the budget counts.
    # So is its runtime-size path, with ``arrays`` (device kernels) and the GPU ops.

    def run(self, args: list, sizes: list | None = None) -> object:
        """The CPU's ``run``; ``while`` loops inside compiled computations (reducers,
        comparators...) get this evaluation's iteration limit, and their status is read
        once at the end (``gpu/computation.py``: ``LoopRun``)."""
        loops = LoopRun(self.limits.max_while_iterations, getattr(self, "device", None))
        token = LOOP_RUN.set(loops)
        try:
            value = super().run(args, sizes)
        except BaseException:
            loops.check(raise_error=False)
            raise
        finally:
            LOOP_RUN.reset(token)
        loops.check()
        return value

    # -- planning -------------------------------------------------------------
    def _prepare(self, instr, position) -> PreparedStep:
        step = super()._prepare(instr, position)  # CPU fn, kwargs bound to this interpreter
        if instr.opcode == "parameter" or forwarded(instr) is not None:
            return step  # (a tuple element read straight from its producer: no kernel)
        if instr.opcode == "async-start":
            # the CPU interpreter's async-start, whose wrapped op or called computation was
            # prepared by this interpreter (GPU ops); its context zeros go to the device
            start = step.fn

            def run_start(*operands):
                value = start(*operands)
                return value[:2] + tuple(to_device(c) for c in value[2:])

            return PreparedStep(instr, run_start, step.kwargs, step.operand_index)
        entry = GPU_OPS.get(instr.opcode)
        if entry is None:
            return self._fallback_step(instr, position, step.operand_index,
                                       "no GPU kernel for this opcode")
        kwargs = {k: v for k, v in step.kwargs.items() if entry.var_keywords or k in entry.params}
        extras = {"ctx": self, "shape": instr.shape, "instruction_name": instr.name,
                  "operand_shapes": [o.shape for o in instr.operands], "opcode": instr.opcode}
        for name, value in extras.items():
            if name in entry.params and name not in kwargs:
                kwargs[name] = value
        gpu_fn = entry.fn
        lazy: list = []

        def run(*operands, **kw):
            try:
                return gpu_fn(*operands, **kw)
            except GpuFallback as fb:
                if not lazy:
                    lazy.append(self._cpu._prepare(instr, position))
                # the runtime-size path may have given the op the valid part's shape
                # (and a slice its cut attribute): the CPU op gets them too
                return self._run_fallback(instr, lazy[0], operands, fb.reason,
                                          {k: kw[k] for k in _SIZED_KEYWORDS if k in kw})

        return PreparedStep(instr, run, kwargs, step.operand_index)

    def _fallback_step(self, instr, position, operand_index, reason) -> PreparedStep:
        if not self.fallback:
            raise HloUnsupportedError(instr.opcode, "gpu", f"{reason} (CPU fallback disabled)",
                                      instruction=instr.name)
        cpu_step = self._cpu._prepare(instr, position)

        def run(*operands):
            return self._run_fallback(instr, cpu_step, operands, reason)

        return PreparedStep(instr, run, {}, operand_index)

    def _run_fallback(self, instr, cpu_step, operands, reason, overrides=None):
        if not self.fallback:
            raise HloUnsupportedError(instr.opcode, "gpu", f"{reason} (CPU fallback disabled)",
                                      instruction=instr.name)
        if self.report.add(instr.opcode, reason):
            import warnings
            warnings.warn(f"hloref gpu backend: {instr.opcode} runs on the CPU ({reason})",
                          RuntimeWarning, stacklevel=2)
        host = [to_host(o) for o in operands]
        self._cpu.live_bytes = self.live_bytes
        kwargs = cpu_step.kwargs
        if overrides:
            kwargs = {**kwargs, **{k: v for k, v in overrides.items() if k in kwargs}}
        mine, cpu = self.__dict__, self._cpu.__dict__
        for name in INTERPRETER_STATE:  # the CPU op reads and advances this evaluation's state
            if name in mine:
                cpu[name] = mine[name]
            else:
                cpu.pop(name, None)
        try:
            value = cpu_step.fn(*host, **kwargs)
        finally:
            for name in INTERPRETER_STATE:
                if name in cpu:
                    mine[name] = cpu[name]
        if isinstance(value, np.generic):
            value = np.asarray(value)
        return to_device(value)
