"""Planted miscompilations: text-level mutations of an optimized HLO module that a
maintainer would call a real miscompilation.

``mutants(text, args, seed=0)`` returns :class:`Mutant` objects (kind, one-line
description, mutated text). Each kind is a generator of candidates over instruction
lines, tried in a seeded order; a candidate is kept only if hloref still parses it
and hloref's own result on ``args`` changes (bitwise), so no mutant is dead code.

Kinds:

* ``constant``: a float constant made wrong (scalar: doubled, 0 -> 1, 1 -> 2);
* ``constant-subtle``: an f32/f64 scalar constant times (1 + 1e-4);
* ``compare``: a compare direction flipped (LT <-> GT, LE <-> GE);
* ``swap-operands``: the operands of a subtract or divide swapped;
* ``f8-variant``: a convert to one f8 type made a convert to another
  (f8e4m3fn <-> f8e5m2, ...);
* ``loop-bound``: the integer constant a while condition compares the induction
  variable against, off by one (+1 and -1);
* ``one-element``: one element wrong: an element of a float array constant changed,
  or a dynamic-update-slice inserted after an ENTRY instruction that overwrites one
  element of its value (by 1.5 x + 0.5) for every later use.

A candidate is also dropped when its effect is at rounding level: both evaluated by
hloref with every f32 shape promoted to f64, no output changes by more than
``EQUIVALENT`` (2^-24, half an f32 ulp) of that output's largest magnitude
(``Mutant.effect`` records this normwise relative change). Such mutants, like a
different max subtracted before a softmax's exp, change only rounding (a verdict
should let them pass), or change the result by less than f32 can resolve.

Text-level, with regexes on instruction lines; the module text is otherwise kept
as XLA printed it.
"""

from __future__ import annotations

import dataclasses
import random
import re
from typing import Callable, Iterator

import numpy as np

__all__ = ["Mutant", "KINDS", "mutants", "candidates", "computations", "changes_result",
           "effect", "promote_f32", "EQUIVALENT"]

_FLOAT_TYPES = ("f16", "bf16", "f32", "f64")
_F8_SWAP = {"f8e4m3fn": "f8e5m2", "f8e5m2": "f8e4m3fn", "f8e4m3": "f8e5m2",
            "f8e4m3fnuz": "f8e5m2fnuz", "f8e5m2fnuz": "f8e4m3fnuz", "f8e4m3b11fnuz": "f8e4m3fn",
            "f8e3m4": "f8e4m3"}
_FLIP = {"LT": "GT", "GT": "LT", "LE": "GE", "GE": "LE"}
_NAME = r"[\w.\-]+"
_INSTR = re.compile(r"^(?P<indent>\s*)(?P<root>ROOT\s+)?%(?P<name>" + _NAME + r")\s*=\s*(?P<rest>.*)$")
_HEADER = re.compile(r"^(?P<entry>ENTRY\s+)?%?(?P<name>" + _NAME + r")\s*\(.*\)\s*->\s*.*\{\s*$")
_NUMBER = re.compile(r"^[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|inf|nan)$")


@dataclasses.dataclass
class Mutant:
    kind: str
    description: str
    text: str
    line: int  # 1-based line of the (first) mutated line in the original text
    #: how much the mutation changes the result in exact-ish arithmetic: the largest
    #: change of an output leaf over that leaf's largest magnitude, both modules
    #: evaluated by hloref with f32 promoted to f64 (None: not measured)
    effect: float | None = None


@dataclasses.dataclass
class _Line:
    index: int  # 0-based
    computation: str
    entry: bool
    root: bool
    name: str
    shape: str
    opcode: str
    operands: str  # text between the opcode's parentheses
    after: str  # text after the closing parenthesis (attributes)
    indent: str


def _split_shape(rest: str) -> tuple[str, str] | None:
    """``SHAPE OPCODE(...)...`` → (shape, the rest starting at the opcode)."""
    rest = rest.lstrip()
    if rest.startswith("("):
        depth = 0
        for i, ch in enumerate(rest):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                return rest[: i + 1], rest[i + 1:].lstrip()
        return None
    parts = rest.split(None, 1)
    return (parts[0], parts[1]) if len(parts) == 2 else None


def _parse_line(index, line, comp, entry) -> _Line | None:
    m = _INSTR.match(line)
    if not m:
        return None
    split = _split_shape(m.group("rest"))
    if split is None:
        return None
    shape, tail = split
    om = re.match(r"([\w\-]+)\(", tail)
    if not om:
        return None
    depth, start = 0, om.end() - 1
    for i in range(start, len(tail)):
        depth += tail[i] == "("
        depth -= tail[i] == ")"
        if depth == 0:
            return _Line(index, comp, entry, bool(m.group("root")), m.group("name"), shape,
                         om.group(1), tail[start + 1: i], tail[i + 1:], m.group("indent"))
    return None


def computations(text: str) -> list[tuple[str, bool, list[_Line]]]:
    """(name, is_entry, instruction lines) of every computation of ``text``."""
    out = []
    current = None
    for i, line in enumerate(text.split("\n")):
        h = _HEADER.match(line)
        if h and current is None:
            current = (h.group("name"), bool(h.group("entry")), [])
            continue
        if current is not None:
            if line.strip() == "}":
                out.append(current)
                current = None
                continue
            parsed = _parse_line(i, line, current[0], current[1])
            if parsed:
                current[2].append(parsed)
    return out


def _element_type(shape: str) -> str | None:
    m = re.match(r"^([a-z0-9]+)\[", shape)
    return m.group(1) if m else None


def _dims(shape: str) -> list[int] | None:
    m = re.match(r"^[a-z0-9]+\[([^\]]*)\]", shape)
    if not m:
        return None
    if not m.group(1).strip():
        return []
    try:
        return [int(d) for d in m.group(1).split(",")]
    except ValueError:  # dynamic dimensions
        return None


def _float_dtype(et: str):
    import ml_dtypes
    return {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32,
            "f64": np.float64}[et]


def _format(value: float, et: str) -> str:
    """``value`` rounded to ``et``, printed so that it reads back as the same value."""
    v = _rounded(value, et)
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    return repr(v)


def _rounded(value: float, et: str) -> float:
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.asarray(value, dtype=np.float64).astype(_float_dtype(et)))


def _replace_line(lines: list[str], index: int, new: str) -> str:
    out = list(lines)
    out[index] = new
    return "\n".join(out)


# A candidate: (description, mutated text, line index)
Candidate = tuple[str, str, int]


def _constant_candidates(lines, comps, subtle: bool) -> Iterator[Candidate]:
    for _, _, instrs in comps:
        for ins in instrs:
            et = _element_type(ins.shape)
            if ins.opcode != "constant" or et not in _FLOAT_TYPES:
                continue
            if subtle and et not in ("f32", "f64"):
                continue
            line = lines[ins.index]
            lit = ins.operands.strip()
            if _NUMBER.match(lit):  # scalar
                v = float(lit)
                if not np.isfinite(v):
                    continue
                if subtle:
                    new = _rounded(v * (1 + 1e-4), et)
                    if new == _rounded(v, et):
                        continue
                else:
                    new = 1.0 if v == 0 else 2.0 if v == 1 else v * 2
                    if not np.isfinite(_rounded(new, et)):
                        new = v / 2
                text = f"{ins.operands}"
                new_line = line.replace(f"constant({text})", f"constant({_format(new, et)})", 1)
                yield (f"%{ins.name} in %{ins.computation}: {et} constant {lit} -> "
                       f"{_format(new, et)}" + (" (x (1 + 1e-4))" if subtle else ""),
                       _replace_line(lines, ins.index, new_line), ins.index)
            elif not subtle:  # array constant: handled as one wrong element
                continue


def _array_constant_candidates(lines, comps, rng) -> Iterator[Candidate]:
    for _, _, instrs in comps:
        for ins in instrs:
            et = _element_type(ins.shape)
            if ins.opcode != "constant" or et not in _FLOAT_TYPES or "{" not in ins.operands:
                continue
            numbers = list(re.finditer(r"(?<![\w.])[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|inf|nan)",
                                       ins.operands))
            if not numbers:
                continue
            m = numbers[rng.randrange(len(numbers))]
            v = float(m.group(0))
            new = 1.0 if v == 0 or not np.isfinite(v) else v * 1.5 + 0.5
            lit = ins.operands[: m.start()] + _format(new, et) + ins.operands[m.end():]
            line = lines[ins.index]
            new_line = line.replace(f"constant({ins.operands})", f"constant({lit})", 1)
            yield (f"%{ins.name} in %{ins.computation}: element {numbers.index(m)} of a "
                   f"{ins.shape} constant {m.group(0)} -> {_format(new, et)}",
                   _replace_line(lines, ins.index, new_line), ins.index)


def _compare_candidates(lines, comps) -> Iterator[Candidate]:
    for _, _, instrs in comps:
        for ins in instrs:
            if ins.opcode != "compare":
                continue
            m = re.search(r"direction=(LT|GT|LE|GE)\b", ins.after)
            if not m:
                continue
            d = m.group(1)
            line = lines[ins.index]
            new_line = line.replace(f"direction={d}", f"direction={_FLIP[d]}", 1)
            yield (f"%{ins.name} in %{ins.computation}: compare direction {d} -> {_FLIP[d]}",
                   _replace_line(lines, ins.index, new_line), ins.index)


def _swap_candidates(lines, comps) -> Iterator[Candidate]:
    for _, _, instrs in comps:
        for ins in instrs:
            if ins.opcode not in ("subtract", "divide"):
                continue
            ops = [o.strip() for o in ins.operands.split(",")]
            if len(ops) != 2 or ops[0] == ops[1]:
                continue
            line = lines[ins.index]
            new_line = line.replace(f"{ins.opcode}({ins.operands})",
                                    f"{ins.opcode}({ops[1]}, {ops[0]})", 1)
            yield (f"%{ins.name} in %{ins.computation}: {ins.opcode} operands swapped "
                   f"({ops[0]}, {ops[1]}) -> ({ops[1]}, {ops[0]})",
                   _replace_line(lines, ins.index, new_line), ins.index)


def _f8_candidates(lines, comps) -> Iterator[Candidate]:
    for _, _, instrs in comps:
        for ins in instrs:
            et = _element_type(ins.shape)
            if ins.opcode != "convert" or et not in _F8_SWAP:
                continue
            line = lines[ins.index]
            new_line = line.replace(f"= {et}[", f"= {_F8_SWAP[et]}[", 1)
            yield (f"%{ins.name} in %{ins.computation}: convert to {et} became a convert to "
                   f"{_F8_SWAP[et]}", _replace_line(lines, ins.index, new_line), ins.index)


def _called(ins: _Line) -> list[str]:
    return re.findall(r"(?:calls|to_apply|condition|body)=%?(" + _NAME + r")", ins.after)


def _loop_bound_candidates(lines, comps) -> Iterator[Candidate]:
    by_name = {name: instrs for name, _, instrs in comps}
    for _, _, instrs in comps:
        for ins in instrs:
            if ins.opcode != "while":
                continue
            m = re.search(r"condition=%?(" + _NAME + r")", ins.after)
            if not m:
                continue
            # the condition and the computations it calls (fusions wrapping the compare)
            seen, todo = [], [m.group(1)]
            while todo:
                c = todo.pop()
                if c in seen or c not in by_name:
                    continue
                seen.append(c)
                for i in by_name[c]:
                    todo.extend(_called(i))
            for c in seen:
                for i in by_name[c]:
                    et = _element_type(i.shape)
                    if i.opcode != "constant" or not et or et[0] not in "su" or \
                            not re.fullmatch(r"-?\d+", i.operands.strip()):
                        continue
                    v = int(i.operands)
                    for delta in (1, -1):
                        line = lines[i.index]
                        new_line = line.replace(f"constant({i.operands})", f"constant({v + delta})", 1)
                        yield (f"while %{ins.name}: bound %{i.name} in its condition %{c} "
                               f"{v} -> {v + delta}", _replace_line(lines, i.index, new_line),
                               i.index)


def _dus_candidates(lines, comps, args, rng) -> Iterator[Candidate]:
    """A dynamic-update-slice after an ENTRY instruction that overwrites one element of
    its value; later uses (and ROOT) read the updated value."""
    entry = next((c for c in comps if c[1]), None)
    if entry is None or args is None:
        return
    name, _, instrs = entry
    eligible = [i for i in instrs
                if _element_type(i.shape) in _FLOAT_TYPES and _dims(i.shape)
                and i.opcode not in ("parameter", "constant") and all(d > 0 for d in _dims(i.shape))]
    if not eligible:
        return
    values = _entry_values(lines, args, {i.name for i in eligible})
    order = list(eligible)
    rng.shuffle(order)
    for ins in order:
        if ins.name not in values:
            continue
        x = np.asarray(values[ins.name])
        dims = _dims(ins.shape)
        idx = tuple(rng.randrange(d) for d in dims)
        et = _element_type(ins.shape)
        old = float(x[idx])
        if not np.isfinite(old):
            continue
        new = _format(old * 1.5 + 0.5, et)
        rank = len(dims)
        upd, dus = "hloref_mutant_update", "hloref_mutant_dus"
        ind = ins.indent
        new_lines = [
            f"{ind}%{upd} = {et}[{','.join('1' * rank)}] constant({'{' * rank}{new}{'}' * rank})",
            *[f"{ind}%hloref_mutant_index.{k} = s32[] constant({idx[k]})" for k in range(rank)],
            f"{ind}{'ROOT ' if ins.root else ''}%{dus} = {ins.shape} dynamic-update-slice("
            f"%{ins.name}, %{upd}, "
            + ", ".join(f"%hloref_mutant_index.{k}" for k in range(rank)) + ")",
        ]
        out = list(lines)
        if ins.root:
            out[ins.index] = out[ins.index].replace("ROOT ", "", 1)
        use = re.compile(r"%" + re.escape(ins.name) + r"(?![\w.\-])")
        end = max(i.index for i in instrs)
        for j in range(ins.index + 1, end + 1):
            out[j] = use.sub(f"%{dus}", out[j])
        out[ins.index + 1: ins.index + 1] = new_lines
        yield (f"%{ins.name} in ENTRY: element {list(idx)} overwritten by a dynamic-update-slice "
               f"({old:g} -> {new})", "\n".join(out), ins.index)


def _entry_values(lines, args, names) -> dict:
    import hloref
    from hloref.evaluator.interpreter import Interpreter
    from hloref.api import coerce_argument
    module = hloref.parse("\n".join(lines))
    values = {}

    def observe(comp, instr, value):
        if comp is module.entry and instr.name in names:
            values[instr.name] = value

    coerced = [coerce_argument(a, p.shape, f"argument {i}")
               for i, (a, p) in enumerate(zip(args, module.entry.parameters))]
    Interpreter(module, observer=observe).run(coerced)
    return values


def _one_element_candidates(lines, comps, args, rng) -> Iterator[Candidate]:
    yield from _array_constant_candidates(lines, comps, rng)
    yield from _dus_candidates(lines, comps, args, rng)


def _limits():
    """A mutated loop bound must not make hloref loop for long."""
    import hloref
    return hloref.Limits(max_while_iterations=100_000)


KINDS: tuple[str, ...] = ("constant", "constant-subtle", "compare", "swap-operands",
                          "f8-variant", "loop-bound", "one-element")


def candidates(text: str, kind: str, rng: random.Random, args=None) -> list[Candidate]:
    lines = text.split("\n")
    comps = computations(text)
    gen: dict[str, Callable[[], Iterator[Candidate]]] = {
        "constant": lambda: _constant_candidates(lines, comps, subtle=False),
        "constant-subtle": lambda: _constant_candidates(lines, comps, subtle=True),
        "compare": lambda: _compare_candidates(lines, comps),
        "swap-operands": lambda: _swap_candidates(lines, comps),
        "f8-variant": lambda: _f8_candidates(lines, comps),
        "loop-bound": lambda: _loop_bound_candidates(lines, comps),
        "one-element": lambda: _one_element_candidates(lines, comps, args, rng),
    }
    if kind == "one-element":
        # array constants first (in seeded order), then inserted dynamic-update-slices
        arrays = list(_array_constant_candidates(lines, comps, rng))
        rng.shuffle(arrays)
        return arrays + list(_dus_candidates(lines, comps, args, rng))
    out = list(gen[kind]())
    if kind == "loop-bound":
        # candidates come in (+1, -1) pairs per bound: shuffle the bounds, then alternate
        # the direction (+1 of the first bound, -1 of the second, ...), the others after
        pairs = [out[i: i + 2] for i in range(0, len(out), 2)]
        rng.shuffle(pairs)
        first = [p[i % len(p)] for i, p in enumerate(pairs)]
        return first + [c for p in pairs for c in p if c not in first]
    rng.shuffle(out)
    return out


def _leaves(v) -> list:
    if isinstance(v, (tuple, list)):
        return [x for e in v for x in _leaves(e)]
    return [v]


def changes_result(a, b) -> bool:
    """Whether two results differ bitwise (NaNs with the same bits are equal)."""
    la, lb = _leaves(a), _leaves(b)
    if len(la) != len(lb):
        return True
    for x, y in zip(la, lb):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape or x.dtype != y.dtype:
            return True
        if x.dtype.kind in "biu":
            if not np.array_equal(x, y):
                return True
        elif x.tobytes() != y.tobytes():
            return True
    return False


def promote_f32(text: str) -> str:
    """The module with every f32 shape made f64 (bf16, f16, f8 are left alone: their
    rounding is part of what the program means)."""
    return re.sub(r"(?<![\w.])f32\[", "f64[", text)


def _promote_args(args) -> list:
    return [np.asarray(a, dtype=np.float64) if np.asarray(a).dtype == np.float32 else a
            for a in args]


def effect(a, b) -> float:
    """max over output leaves of max|a - b| / max|b| (integer or shape differences: inf)."""
    worst = 0.0
    for x, y in zip(_leaves(a), _leaves(b)):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape:
            return float("inf")
        if x.dtype.kind not in "fc" or y.dtype.kind not in "fc":
            if x.dtype.kind in "fc" or y.dtype.kind in "fc":
                x, y = x.astype(np.float64), y.astype(np.float64)
            elif not np.array_equal(x, y):
                return float("inf")
            else:
                continue
        x, y = x.astype(np.float64), y.astype(np.float64)
        same = (x == y) | (np.isnan(x) & np.isnan(y))
        if same.all():
            continue
        if not (np.isfinite(x) | same).all() or not (np.isfinite(y) | same).all():
            return float("inf")
        scale = np.max(np.abs(y[np.isfinite(y)]), initial=0.0)
        d = np.max(np.abs(np.where(same, 0.0, x - y)))
        worst = max(worst, float(d / scale) if scale > 0 else float("inf"))
    return worst


#: A mutant whose f64 effect is at most this (half an f32 ulp of each output's largest
#: magnitude) is dropped: either equivalent to the original up to rounding (e.g. a
#: different max subtracted before a softmax's exp: ~1e-16) or a real change below what
#: f32 outputs can resolve (e.g. a mean off by 1e-4 entering a variance to second
#: order: ~1e-9), which no verdict on f32 results can be asked to flag.
EQUIVALENT = 2.0 ** -24


def mutants(text: str, args=None, *, seed: int = 0, per_kind: int = 2, max_tries: int = 8,
            kinds: tuple[str, ...] = KINDS, check: bool = True) -> list[Mutant]:
    """Up to ``per_kind`` mutants of each kind, chosen in a seeded order; with ``check``
    (needs ``args``), only mutants hloref parses, whose hloref result on ``args`` differs
    from the original's, and whose effect is above rounding level (evaluated with f32
    promoted to f64, some output changes by more than ``EQUIVALENT`` of its magnitude;
    when the f64 module does not evaluate, this last filter is skipped) — at most
    ``max_tries`` candidates tried per kind."""
    import hloref
    reference = reference64 = None
    if check:
        if args is None:
            raise ValueError("check=True needs the program's arguments")
        reference = hloref.evaluate(hloref.parse(text), *args)
        args64 = _promote_args(args)
        try:
            reference64 = hloref.evaluate(hloref.parse(promote_f32(text)), *args64,
                                          limits=_limits())
        except hloref.HloError:
            reference64 = None
    out: list[Mutant] = []
    for kind in kinds:
        rng = random.Random(f"{seed}:{kind}")
        kept, tried, seen = 0, 0, set()
        for description, mutated, index in candidates(text, kind, rng, args):
            if kept >= per_kind or tried >= max_tries:
                break
            if mutated in seen or mutated == text:
                continue
            seen.add(mutated)
            tried += 1
            if check:
                try:
                    value = hloref.evaluate(hloref.parse(mutated), *args, limits=_limits())
                except hloref.HloError:  # includes a loop made to run away (HloLimitError)
                    continue
                if not changes_result(value, reference):
                    continue
                size = None
                if reference64 is not None:
                    try:
                        value64 = hloref.evaluate(hloref.parse(promote_f32(mutated)), *args64,
                                                  limits=_limits())
                        size = effect(value64, reference64)
                    except hloref.HloError:
                        size = float("inf")  # e.g. a loop made to run away
                    if size <= EQUIVALENT:
                        continue
            out.append(Mutant(kind, description, mutated, index + 1, effect=size))
            kept += 1
    return out
