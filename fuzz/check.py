"""Regression checks with hloref on both sides: did a transformation change the answer?

``check_modules(before, after, args)`` evaluates BEFORE's envelope on ``args``
(``fuzz/envelope.py``) and asks whether AFTER, evaluated by hloref on the same
inputs, lies inside it. A compiler pass that only reassociates, fuses or rewrites
within XLA's freedoms stays inside; a pass that changes the answer does not. When it
is outside, the first instruction (in BEFORE's order) that AFTER still has under the
same name and whose value falls outside that instruction's envelope in BEFORE is
named.
"""

from __future__ import annotations

from dataclasses import dataclass

from hloref.ir import Module

from .envelope import Envelope, EnvelopePolicy, EnvelopeVerdict, confirmed, sample
from .vocabulary import AFTER, BEFORE, verdict_meaning

__all__ = ["CheckReport", "Reference", "check_modules"]


@dataclass
class CheckReport:
    verdict: str  # match | mismatch
    envelope: EnvelopeVerdict
    #: (instruction name, opcode, its verdict) of the first differing instruction
    first_instruction: tuple | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.verdict == "match"

    def summary(self) -> str:
        """The verdict in the shared vocabulary (``fuzz/vocabulary.py``): both values are
        hloref's, the envelope is BEFORE's and AFTER's value is judged."""
        lines = [f"verdict: {self.verdict}: "
                 f"{verdict_meaning(self.verdict, ours=BEFORE, theirs=AFTER)}",
                 self.envelope.describe(ours=BEFORE, theirs=AFTER)]
        if self.first_instruction is not None:
            name, opcode, v = self.first_instruction
            lines.append(f"first instruction (by name) outside its envelope: %{name} "
                         f"({opcode}): {v.describe(ours=BEFORE, theirs=AFTER)}")
        return "\n".join(lines)


class Reference:
    """BEFORE's envelope on one set of inputs, sampled once and reused for every
    module compared with it (the snapshots of a dump)."""

    def __init__(self, module: Module, args: list, policy: EnvelopePolicy | None = None, *,
                 limits=None):
        self.module = module
        self.args = list(args)
        self.policy = policy or EnvelopePolicy()
        self.limits = limits
        s = sample(module, self.args, self.policy, limits=limits)
        self.seconds = s.seconds
        self.nominal = s.nominal
        self.envelope = Envelope.of(s, self.policy, module)
        self._per_instruction: dict | None = None

    def check(self, value) -> EnvelopeVerdict:
        """``value`` against the envelope; a marginal miss is judged again with more
        runs (``envelope.confirmed``), whose envelope then serves every later check."""
        envelope, verdict, policy = confirmed(self.module, self.args, value, self.envelope,
                                              self.envelope.check(value), self.policy,
                                              limits=self.limits)
        if envelope is not self.envelope:
            self.envelope, self.policy, self._per_instruction = envelope, policy, None
        return verdict

    def instruction_envelopes(self) -> dict:
        """name -> (opcode, Envelope) for every entry instruction of BEFORE (sampled
        again with the same seeds, recording the intermediate values)."""
        if self._per_instruction is None:
            s = sample(self.module, self.args, self.policy, limits=self.limits, record_entry=True)
            opcodes = {i.name: i.opcode for i in self.module.entry.instructions}
            self._per_instruction = {
                name: (opcodes.get(name, "?"),
                       Envelope(nominal, s.entry_samples.get(name, []), self.policy, self.module,
                                peak=s.peak))
                for name, nominal in s.entry_nominal.items()}
        return self._per_instruction


def check_modules(before: Module, after: Module, args: list, *,
                  policy: EnvelopePolicy | None = None, limits=None,
                  reference: Reference | None = None) -> CheckReport:
    """Is AFTER (evaluated by hloref) inside BEFORE's envelope on ``args``?"""
    import time

    from hloref.evaluator.interpreter import Interpreter, topological_order
    t0 = time.perf_counter()
    reference = reference or Reference(before, args, policy, limits=limits)
    trace: dict = {}

    def observe(comp, instr, value):
        if comp is after.entry:
            trace[instr.name] = value

    value = Interpreter(after, limits=limits, observer=observe).run(list(args))
    verdict = reference.check(value)
    report = CheckReport("match" if verdict.ok else "mismatch", verdict)
    if not verdict.ok:
        envelopes = reference.instruction_envelopes()
        for instr in topological_order(before.entry):
            if instr.opcode == "parameter" or instr.name not in trace or \
                    instr.name not in envelopes:
                continue
            opcode, env = envelopes[instr.name]
            try:
                v = env.check(trace[instr.name])
            except Exception:  # noqa: BLE001 - different structure: not comparable by name
                continue
            if not v.ok:
                report.first_instruction = (instr.name, opcode, v)
                break
    report.seconds = time.perf_counter() - t0
    return report
