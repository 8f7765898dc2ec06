"""Batched oracle runs: many generated programs compiled as one module, run once, split.

XLA:CPU spends most of a fuzz campaign's time compiling, and much of a compile is a
fixed cost per module. ``combine(modules)`` puts independent programs side by side in
one module: every computation and instruction is renamed with the prefix ``b<i>.``
(the program's place in the batch), the entry computations are merged into one whose
parameters are the programs' parameters in order and whose root is the tuple of their
roots. The programs share no value, so each part of the result is what that program
computes alone, unless XLA's optimization of the whole changes it.

``check_batch(items, worker)`` runs a batch and judges each program on its part of
the result with the usual property (``property.check_program`` given the value).

* **Confirmation.** A program whose part is anything but a match is run again alone
  (the ordinary ``check_program``: its own compile, localisation of a mismatch) and
  the outcome alone is the one recorded; a mismatch that vanishes alone is a
  cross-program effect of the batch, counted in ``Stats.batch_only`` and not reported.
* **A batch the oracle refuses, crashes on or hangs on** is not judged: when the
  oracle's message names instructions of some programs (``b<i>.``) or an opcode it
  cannot compile (``UNIMPLEMENTED: cosh``: the programs holding one), those run alone
  and the others as a batch again; otherwise the batch is split in halves, down to
  single programs run alone. A crash or a timeout runs every program alone (each with
  the ordinary time limit): one more oracle restart instead of about log2(n).
* **Refusals learned.** When the oracle refuses a program alone and its message names
  the opcode (``UNIMPLEMENTED: cosh``), the (opcode, element type) pairs are kept
  (``Refusals``); later programs holding one run alone from the start, and so do
  programs holding every opcode and element type of a reduced crash or hang.
"""

from __future__ import annotations

import re
import time

from hloref.attrs import ComputationRef
from hloref.ir import Computation, Instruction, Module
from hloref.shapes import TupleShape

from .property import Outcome, check_program

__all__ = ["combine", "check_batch", "check_alone", "BatchTimer", "Refusals"]

_NAMED = re.compile(r"\bb(\d+)\.")
#: How XLA:CPU names the opcode it cannot compile ("UNIMPLEMENTED: cosh", "unary complex
#: op 'asinh'", "unsupported operand type U2 in op dot").
_REFUSED_OP = re.compile(r"UNIMPLEMENTED: (?:unary complex op '([\w-]+)'|unsupported operand "
                         r"type \w+ in op ([\w-]+)|([\w-]+)$)")


def _refused_opcode(message: str | None) -> str | None:
    first = message.splitlines()[0] if message else ""
    m = _REFUSED_OP.search(first)
    return next(g for g in m.groups() if g) if m else None


class Refusals:
    """What the oracle refused to compile, learned from programs refused alone: opcodes
    it refuses whatever the types (``UNIMPLEMENTED: cosh``: XLA:CPU has no emitter for
    the opcode) and (opcode, element type) pairs (``unsupported operand type S2 in op
    dot``); a program holding one is run alone instead of in a batch, so it does not
    make its batch fail (a failed batch compile costs about 40 % of a good one) and
    split. ``to_json``/``merge`` share what one worker learned with the others
    (``OUT/.refusals.json``)."""

    def __init__(self):
        self.pairs: set = set()
        #: opcodes refused whatever their element types
        self.opcodes: set = set()
        #: (opcodes, element types) of reduced crash and timeout findings
        self.crashes: list = []

    @staticmethod
    def _pairs(module, opcode=None) -> set:
        from hloref.shapes import ArrayShape, flatten_shape
        out = set()
        for _, instr in module.instructions():
            if opcode is None or instr.opcode == opcode:
                for operand in instr.operands or [instr]:
                    for sh in flatten_shape(operand.shape):
                        if isinstance(sh, ArrayShape):
                            out.add((instr.opcode, sh.element_type.name))
        return out

    def learn(self, module, message: str) -> None:
        opcode = _refused_opcode(message)
        if opcode:
            self.pairs |= self._pairs(module, opcode)
            first = message.splitlines()[0] if message else ""
            if re.search(r"UNIMPLEMENTED: [\w-]+$", first):  # the opcode, whatever the types
                self.opcodes.add(opcode)

    def learn_crash(self, signature: dict) -> None:
        """A reduced crash (or hang): a program holding all its opcodes and element
        types runs alone from now on, so it does not take a batch down with it."""
        entry = (frozenset(signature.get("opcodes") or ()),
                 frozenset(signature.get("element_types") or ()))
        if entry[0] and entry not in self.crashes:
            self.crashes.append(entry)

    def refused(self, module) -> bool:
        if self.crashes:
            from .findings import module_opcodes, module_types
            ops, types = set(module_opcodes(module)), set(module_types(module))
            if any(o <= ops and t <= types for o, t in self.crashes):
                return True
        if self.opcodes and any(instr.opcode in self.opcodes
                                for _, instr in module.instructions()):
            return True
        return bool(self.pairs) and not self.pairs.isdisjoint(self._pairs(module))

    def size(self) -> int:
        return len(self.pairs) + len(self.opcodes) + len(self.crashes)

    def to_json(self) -> dict:
        return {"pairs": sorted(self.pairs), "opcodes": sorted(self.opcodes),
                "crashes": [[sorted(o), sorted(t)] for o, t in self.crashes]}

    def merge(self, data: dict) -> None:
        """Add what ``data`` (another ``to_json()``) knows."""
        self.pairs |= {tuple(p) for p in data.get("pairs", ())}
        self.opcodes |= set(data.get("opcodes", ()))
        for o, t in data.get("crashes", ()):
            self.learn_crash({"opcodes": o, "element_types": t})


def _renamed_refs(value, names: dict):
    if isinstance(value, ComputationRef):
        return ComputationRef(names[str(value)])
    if isinstance(value, list):
        return [_renamed_refs(v, names) for v in value]
    if isinstance(value, tuple):
        return tuple(_renamed_refs(v, names) for v in value)
    return value


def combine(modules) -> Module:
    """One module computing every module of ``modules``: parameters concatenated in
    order, the root the tuple of their roots. The inputs are not modified."""
    import hloref
    computations: dict[str, Computation] = {}
    entry_instructions: list[Instruction] = []
    roots: list[Instruction] = []
    first_parameter = 0
    for i, module in enumerate(modules):
        copy = hloref.parse(module.to_text())  # a private copy to rename
        names = {name: f"b{i}.{name}" for name in copy.computations}
        for comp in copy.computations.values():
            for instr in comp.instructions:
                instr.name = f"b{i}.{instr.name}"
                instr.attrs = {k: _renamed_refs(v, names) for k, v in instr.attrs.items()}
        entry = copy.entry
        for comp in copy.computations.values():
            if comp is not entry:
                comp.name = names[comp.name]
                computations[comp.name] = comp
        params = entry.parameters
        for p in params:
            p.parameter_number += first_parameter
        first_parameter += len(params)
        entry_instructions += entry.instructions
        roots.append(entry.root)
    root = Instruction(name="batch.root", opcode="tuple",
                       shape=TupleShape(tuple(r.shape for r in roots)), operands=roots)
    entry = Computation(name="batch.entry", instructions=entry_instructions + [root], root=root,
                        is_entry=True)
    computations[entry.name] = entry
    return Module(name="batch", computations=computations, entry_name=entry.name)


class BatchTimer:
    """Where the oracle's time went, read from the worker's own accumulators
    (``OracleWorker.seconds``/``compile_seconds``/``run_seconds``) around a call."""

    def __init__(self, stats):
        self.stats = stats

    def around(self, worker, fn, *args, **kw):
        w = [getattr(worker, a, 0.0) for a in ("seconds", "compile_seconds", "run_seconds")]
        t0 = time.perf_counter()
        try:
            return fn(*args, **kw)
        finally:
            wall = time.perf_counter() - t0
            d = [getattr(worker, a, 0.0) - x for a, x in
                 zip(("seconds", "compile_seconds", "run_seconds"), w)]
            s = self.stats
            s.oracle_seconds += d[0]
            s.compile_seconds += d[1]
            s.run_seconds += d[2]
            s.hop_seconds += max(0.0, d[0] - d[1] - d[2])
            self.rest = max(0.0, wall - d[0])  # the caller splits it (hloref, comparison)


def _judge(item, worker, *, oracle, timeout, timer, oracle_value=None):
    """``check_program`` with the time split kept; an exception is returned, not raised."""
    module, args = item
    s = timer.stats
    try:
        outcome = timer.around(worker, check_program, module, args, worker, oracle=oracle,
                               timeout=timeout, oracle_value=oracle_value,
                               localize=oracle_value is None)
    except Exception as exc:  # noqa: BLE001 - the runner keeps the program and goes on
        return exc
    report = outcome.report
    hl = getattr(report, "hloref_seconds", 0.0) if report is not None else 0.0
    s.hloref_seconds += min(hl, timer.rest)
    s.compare_seconds += max(0.0, timer.rest - hl)
    return outcome


def check_alone(item, worker, *, oracle: str = "xla", timeout: float = 60.0, stats) -> object:
    """One program run and judged alone (an ``Outcome``, or the exception it raised)."""
    stats.alone_runs += 1
    return _judge(item, worker, oracle=oracle, timeout=timeout, timer=BatchTimer(stats))


def check_batch(items, worker, *, oracle: str = "xla", timeout: float = 60.0, stats,
                refusals: Refusals | None = None) -> list:
    """Judge ``items`` (``(module, args)`` pairs) with batched oracle runs; returns one
    ``Outcome`` (or the exception the check raised) per item, in order. ``refusals``
    (kept by the caller across batches) sends programs like ones the oracle refused
    straight to a run alone, and learns from the refusals seen alone."""
    timer = BatchTimer(stats)
    results: list = [None] * len(items)

    def alone(i):
        results[i] = check_alone(items[i], worker, oracle=oracle, timeout=timeout, stats=stats)
        r = results[i]
        if refusals is not None and isinstance(r, Outcome) and r.kind == "rejected" and \
                not r.message.startswith("hloref"):
            refusals.learn(items[i][0], r.message)

    def run(indices):
        if len(indices) == 1:
            alone(indices[0])
            return
        module = combine([items[i][0] for i in indices])
        args = [a for i in indices for a in items[i][1]]
        text = module.to_text()
        stats.batches += 1
        result = timer.around(worker, worker.run, text, args, timeout=timeout)
        if result.ok:
            for part, i in enumerate(indices):
                outcome = _judge(items[i], worker, oracle=oracle, timeout=timeout, timer=timer,
                                 oracle_value=result.value[part])
                if isinstance(outcome, Outcome) and (outcome.kind == "match" or (
                        outcome.kind == "rejected" and outcome.message.startswith("hloref"))):
                    results[i] = outcome
                    continue
                stats.confirmations += 1  # confirm alone: the outcome alone is the one kept
                alone(i)
                if isinstance(results[i], Outcome) and results[i].kind == "match":
                    stats.batch_only += 1
            return
        stats.batch_splits += 1
        if result.kind in ("timeout", "crash"):  # alone: one more restart, not log2(n)
            for i in indices:
                alone(i)
            return
        named = sorted({indices[int(m.group(1))] for m in _NAMED.finditer(result.message or "")
                        if int(m.group(1)) < len(indices)})
        refused_op = _refused_opcode(result.message)
        if not named and refused_op:  # the programs holding that opcode are the suspects
            named = [i for i in indices
                     if any(instr.opcode == refused_op for _, instr in items[i][0].instructions())]
        if named and len(named) < len(indices):
            for i in named:
                alone(i)
            run([i for i in indices if i not in named])
            return
        half = len(indices) // 2
        run(indices[:half])
        run(indices[half:])

    together = []
    for i, (module, _) in enumerate(items):
        if refusals is not None and refusals.refused(module):
            alone(i)
        else:
            together.append(i)
    if together:
        run(together)
    return results
