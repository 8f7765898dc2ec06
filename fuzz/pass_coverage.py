"""Pass coverage: which of XLA's HLO passes changed a program, and which emitters
compiled it, read from XLA's per-pass dump.

XLA dumps the module after every pass that changed it (``xla_dump_to`` with
``xla_dump_hlo_pass_re=.*``; ``fuzz/blame.py``'s ``read_dump`` groups the files), and
at each pipeline's start. A snapshot ``after_PASS`` therefore differs from the
snapshot before it by what ``PASS`` did: the instructions whose text (names and
metadata aside from the latter) appear in one and not the other are the ones the
pass added, removed or rewrote, and their opcodes make the pass's ``(pass, opcode)``
pairs. Snapshots taken at a pipeline's start change nothing by themselves and count
for no pass. The optimized module (``cpu_after_optimizations``) names the emitters:
each fusion's ``kind`` (``kLoop``, ``kInput``, ``kOutput``, ``kCustom`` with its
``fusion_config`` kind, for example ``__ynn_fusion``) and each other top-level
instruction XLA:CPU emits on its own (a thunk: ``dot``, ``while``...), paired with
the element type of its result.

``probe(worker, text, args)`` compiles one program with the dump enabled (in the
oracle worker, which survives XLA aborting) and returns its ``Reach``;
``Coverage`` accumulates reaches, says which pairs are new, and is what the
campaign summary reports (``summary()``, ``format_coverage``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass, field

from hloref.op_properties import opcodes_with

from .blame import read_dump

__all__ = ["Reach", "Coverage", "reach_of_dump", "probe", "instruction_lines", "opcode_of",
           "changed_opcodes", "emitters_of", "format_coverage", "load_coverage", "DUMP_OPTIONS"]

#: the debug options that make XLA dump the module after every pass that changed it
DUMP_OPTIONS = {"xla_dump_hlo_pass_re": ".*"}

_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
#: instruction and computation names: passes rename what they do not change
_NAME = re.compile(r"%[\w.\-]+")
_METADATA = re.compile(r",\s*metadata=\{[^{}]*\}")
_FUSION_KIND = re.compile(r"\bkind=(k\w+)")
_CONFIG_KIND = re.compile(r'"fusion_config":\{"kind":"([^"]+)"')
#: top-level instructions that emit nothing of their own
_NOT_EMITTED = opcodes_with("plumbing") | opcodes_with("emits-nothing")


@dataclass
class Reach:
    """What compiling one program reached: ``pairs`` (pass, opcode) and ``emitters``
    (emitter, element type); ``passes`` are the passes that changed it."""

    pairs: set = field(default_factory=set)
    emitters: set = field(default_factory=set)

    @property
    def passes(self) -> set:
        return {p for p, _ in self.pairs}


def opcode_of(rhs: str) -> tuple[str, str] | None:
    """``(opcode, element type)`` of an instruction's right-hand side
    (``f32[2]{0} add(%a, %b), ...``); ``None`` when it is not an instruction."""
    i, n = 0, len(rhs)
    if rhs.startswith("("):  # a tuple shape: skip the balanced parentheses
        depth = 0
        while i < n:
            depth += {"(": 1, ")": -1}.get(rhs[i], 0)
            i += 1
            if depth == 0:
                break
        et = "tuple"
    else:
        while i < n and not rhs[i].isspace():
            i += 1
        et = rhs[:i].split("[", 1)[0]
    m = re.match(r"\s*([a-z][a-z0-9\-]*)\(", rhs[i:])
    return (m.group(1), et) if m else None


def instruction_lines(text: str) -> Counter:
    """The module's instructions as ``(opcode, normalised text)``, counted; the text
    says whether the instruction is in the entry computation or a nested one (a pass
    that fuses or inlines moves instructions between them); names and
    metadata are left out (passes rename instructions they do not change; metadata
    says where an instruction came from, not what it is)."""
    out: Counter = Counter()
    where = "entry"
    for line in text.splitlines():
        m = _INSTR.match(line)
        if not m:
            if line.rstrip().endswith("{"):  # a computation's header
                where = "entry" if line.startswith("ENTRY") else "nested"
            continue
        rhs = _METADATA.sub("", m.group(2))
        op = opcode_of(rhs)
        if op is not None:
            out[(op[0], where + " " + _NAME.sub("%", rhs.strip()))] += 1
    return out


def changed_opcodes(before: str, after: str) -> set:
    """Opcodes of the instructions in one text and not in the other."""
    a, b = instruction_lines(before), instruction_lines(after)
    return {op for op, _ in ((a - b) + (b - a))}


def emitters_of(optimized: str) -> set:
    """(emitter, element type) of the optimized module's top-level instructions."""
    out = set()
    entry_or_top = False
    for line in optimized.splitlines():
        if line.startswith("ENTRY"):
            entry_or_top = True
            continue
        if line.startswith("}"):
            entry_or_top = False
            continue
        if not entry_or_top:
            continue
        m = _INSTR.match(line)
        if not m:
            continue
        op = opcode_of(m.group(2))
        if op is None or op[0] in _NOT_EMITTED:
            continue
        opcode, et = op
        if opcode == "fusion":
            kind = _FUSION_KIND.search(m.group(2))
            name = kind.group(1) if kind else "fusion"
            cfg = _CONFIG_KIND.search(m.group(2))
            if cfg:
                name += f":{cfg.group(1)}"
            out.add((name, et))
        else:
            out.add((f"thunk:{opcode}", et))
    return out


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def reach_of_dump(directory: str) -> Reach:
    """The reach recorded in an XLA dump directory (every module in it)."""
    reach = Reach()
    for dm in read_dump(directory).values():
        if not dm.before:
            continue
        previous = _read(dm.before)
        for snap in dm.snapshots:
            text = _read(snap.path)
            if snap.pass_name != "pipeline-start":
                # copy-insertion's own steps are labelled without after_PASS
                name = snap.pipeline if snap.pass_name.startswith("after_") else snap.pass_name
                for op in changed_opcodes(previous, text):
                    reach.pairs.add((name, op))
            previous = text
        if dm.after:
            reach.emitters |= emitters_of(_read(dm.after))
    return reach


def probe(worker, text: str, args, *, scratch: str | None = None) -> Reach | None:
    """Compile and run ``text`` once more with the per-pass dump (``worker``: an
    ``OracleWorker`` for the xla oracle); its reach, or ``None`` when XLA refused or
    failed on it."""
    directory = tempfile.mkdtemp(prefix="hloref-reach-", dir=scratch)
    try:
        result = worker.run(text, args, debug_options={**DUMP_OPTIONS, "xla_dump_to": directory})
        if not result.ok:
            return None
        return reach_of_dump(directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@dataclass
class Coverage:
    """Pairs reached so far, with how many probed programs reached each."""

    pairs: Counter = field(default_factory=Counter)
    emitters: Counter = field(default_factory=Counter)
    probes: int = 0
    probe_seconds: float = 0.0
    #: programs kept because they reached a new pair
    kept: int = 0
    #: pass -> probed programs it changed
    pass_programs: Counter = field(default_factory=Counter)

    def add(self, reach: Reach) -> tuple[set, set]:
        """Count ``reach``; the pairs and emitters not seen before."""
        self.probes += 1
        new_pairs = {p for p in reach.pairs if p not in self.pairs}
        new_emitters = {e for e in reach.emitters if e not in self.emitters}
        self.pairs.update(reach.pairs)
        self.emitters.update(reach.emitters)
        self.pass_programs.update(reach.passes)
        return new_pairs, new_emitters

    @property
    def passes(self) -> set:
        return {p for p, _ in self.pairs}

    def merge(self, other: "Coverage") -> None:
        self.pairs.update(other.pairs)
        self.emitters.update(other.emitters)
        self.probes += other.probes
        self.probe_seconds += other.probe_seconds
        self.kept += other.kept
        self.pass_programs.update(other.pass_programs)

    def to_json(self) -> dict:
        return {"pairs": [[p, o, n] for (p, o), n in sorted(self.pairs.items())],
                "emitters": [[e, t, n] for (e, t), n in sorted(self.emitters.items())],
                "probes": self.probes, "probe_seconds": self.probe_seconds, "kept": self.kept,
                "pass_programs": dict(sorted(self.pass_programs.items()))}

    @classmethod
    def from_json(cls, d: dict) -> "Coverage":
        c = cls()
        c.pairs = Counter({(p, o): n for p, o, n in d.get("pairs", [])})
        c.emitters = Counter({(e, t): n for e, t, n in d.get("emitters", [])})
        c.probes = int(d.get("probes", 0))
        c.probe_seconds = float(d.get("probe_seconds", 0.0))
        c.kept = int(d.get("kept", 0))
        c.pass_programs = Counter(d.get("pass_programs", {}))
        return c

    def summary(self) -> dict:
        """The ``pass_coverage`` entry of the campaign summary."""
        per_pass = Counter(p for p, _ in self.pairs)
        return {"probes": self.probes, "probe_seconds": round(self.probe_seconds, 3),
                "kept_for_new_pairs": self.kept,
                "passes": len(self.passes), "pass_opcode_pairs": len(self.pairs),
                "emitter_type_pairs": len(self.emitters),
                "pairs_per_pass": dict(sorted(per_pass.items())),
                "programs_per_pass": dict(sorted(self.pass_programs.items())),
                "pairs": sorted([p, o] for p, o in self.pairs),
                "emitters": sorted([e, t] for e, t in self.emitters)}


def load_coverage(directory: str) -> Coverage:
    """The coverage files (``*.json``) of a directory, merged."""
    total = Coverage()
    if not os.path.isdir(directory):
        return total
    for name in sorted(os.listdir(directory)):
        if name.endswith(".json"):
            try:
                with open(os.path.join(directory, name), encoding="utf-8") as f:
                    total.merge(Coverage.from_json(json.load(f)))
            except (OSError, ValueError):
                continue
    return total


def format_coverage(summary: dict) -> str:
    """Lines for the printed campaign summary."""
    c = summary.get("pass_coverage")
    if not c:
        return ""
    top = sorted(c["pairs_per_pass"].items(), key=lambda kv: -kv[1])[:8]
    line = (f"pass coverage ({c['probes']} programs probed, {c['probe_seconds']:.1f} s): "
            f"{c['passes']} passes changed a program, {c['pass_opcode_pairs']} (pass, opcode) "
            f"pairs, {c['emitter_type_pairs']} (emitter, element type) pairs; "
            f"{c['kept_for_new_pairs']} programs kept for new pairs")
    return line + "\n  most pairs: " + ", ".join(f"{p} {n}" for p, n in top)
