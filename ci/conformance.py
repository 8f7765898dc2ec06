"""XLA's own HLO test modules as hloref's conformance suite.

Usage::

    python ci/conformance.py SOURCE [--ref main] [--cache DIR] [--out docs/conformance.md]
                             [--json results.json] [--extract-to DIR] [--limit N]
                             [--no-eval] [--only SUBSTRING] [--timeout S] [--seed N]
                             [--shard I/N] [--xla-only] [--cached-only] [--resume]
                             [--multi-device] [--keys FILE] [--redo A.json ...]
                             [--merge A.json B.json ...]

``SOURCE`` is a bare git directory of openxla/xla (or its mirror ROCm/xla, whose ``main``
holds the same files; ``--ref`` picks the commit), a checkout of it, or a directory of
``.hlo`` files (e.g. written earlier by ``--extract-to``). From ``xla/**/*_test.cc`` every
C++ raw string literal (``R"(...)"``, ``R"hlo(...)hlo"``) that contains ``ENTRY`` is one
module; identical texts are scored once.

For each module:

1. XLA's parser (jaxlib's ``hlo_module_from_text``, in a worker process: XLA may abort)
   decides whether it is HLO at all; texts XLA rejects (format placeholders such as
   ``$0``, deliberately bad modules) are left out of the score.
2. hloref parses it; its printed text must parse again in XLA *and* in hloref to the
   same module (the round trip).
3. XLA:CPU compiles and runs it (through jaxlib, as ``hloref diff`` does) on seeded inputs
   (``hloref.inputs.random_value``, seed ``--seed``; a module with ``bitcast``, which jaxlib
   cannot compile, runs with each bitcast replaced by its logical transpose/reshape,
   ``ci/logical_bitcasts.py``; a set-dimension-size's size parameter is drawn within
   [0, bound], ``bounded_sizes``); when it runs, hloref evaluates it on
   the same inputs and XLA:CPU's value is judged as ``hloref diff`` judges it: a match
   within the per-type ULP floor (``fuzz/compare.py``), else inside the numerical
   envelope (``fuzz/envelope.py``: 8 perturbed evaluations, fewer, at least 2, for a
   module whose evaluation takes over 5 s; reported separately), else another valid
   answer (an unstable sort's tie order, ``judge_sort_ties``; a dynamic result at its
   padded bound, ``valid_region``; counted apart), else a documented
   semantic gap (``fuzz/known_gaps.py``), else a mismatch. A module on several devices
   runs on that many host devices; where its collectives are written for another
   layout than its header declares (the test sets the count in C++), both runs get the
   layout its collectives are consistent on (``devices_for``) in the header.

XLA's answers (parse verdicts, inputs and outputs) are cached under ``--cache`` keyed by
the text's hash: jaxlib is pinned, so they only need computing once. The summary table
goes to ``--out`` (Markdown); ``--json`` writes one record per module.
Exit status: 0 when every module XLA accepts parses in hloref, 1 otherwise, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import pickle
import re
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field

import numpy as np

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: A C++ raw string literal: R"delim( ... )delim".
RAW_STRING_RE = re.compile(r'R"([^()\s\\"]{0,16})\((.*?)\)\1"', re.S)
TEST_FILE_RE = re.compile(r"^xla/.*_test\.cc$")


@dataclass
class Case:
    key: str            # sha256 of the text, 16 hex digits
    text: str
    locations: list = field(default_factory=list)  # "path:line"

    @property
    def where(self) -> str:
        return self.locations[0] if self.locations else self.key


# ----------------------------------------------------------------------------------------
# Extraction
# ----------------------------------------------------------------------------------------

def literals_of(source: str):
    """(line, text) of every raw string literal containing ``ENTRY``."""
    for m in RAW_STRING_RE.finditer(source):
        body = m.group(2)
        if "ENTRY" in body:
            yield source.count("\n", 0, m.start()) + 1, body


def _git_files(git_dir: str, ref: str):
    names = subprocess.run(["git", f"--git-dir={git_dir}", "ls-tree", "-r", "--name-only", ref],
                           check=True, capture_output=True, text=True).stdout.split()
    names = sorted(n for n in names if TEST_FILE_RE.match(n))
    # One `git cat-file --batch` for all files.
    proc = subprocess.Popen(["git", f"--git-dir={git_dir}", "cat-file", "--batch"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        for n in names:
            proc.stdin.write(f"{ref}:{n}\n".encode())
            proc.stdin.flush()
            header = proc.stdout.readline().split()
            if len(header) < 3:
                continue
            size = int(header[2])
            data = proc.stdout.read(size)
            proc.stdout.read(1)
            yield n, data.decode("utf-8", "replace")
    finally:
        proc.stdin.close()
        proc.wait()


def extract(source: str, ref: str = "main") -> list[Case]:
    """Every distinct module text of ``source`` (git dir, checkout, or .hlo directory)."""
    cases: dict[str, Case] = {}

    def add(text: str, where: str):
        key = hashlib.sha256(text.encode()).hexdigest()[:16]
        case = cases.get(key)
        if case is None:
            case = cases[key] = Case(key, text)
        case.locations.append(where)

    if os.path.isfile(os.path.join(source, "HEAD")) and os.path.isdir(os.path.join(source, "objects")):
        files = _git_files(source, ref)
    elif os.path.isdir(os.path.join(source, "xla")):
        def walk():
            for root, _, names in os.walk(os.path.join(source, "xla")):
                for n in sorted(names):
                    path = os.path.relpath(os.path.join(root, n), source)
                    if TEST_FILE_RE.match(path):
                        with open(os.path.join(source, path), encoding="utf-8", errors="replace") as f:
                            yield path, f.read()
        files = walk()
    else:
        for n in sorted(os.listdir(source)):
            if n.endswith(".hlo"):
                with open(os.path.join(source, n), encoding="utf-8") as f:
                    add(f.read(), n)
        return list(cases.values())
    for path, text in files:
        for line, body in literals_of(text):
            add(body, f"{path}:{line}")
    return list(cases.values())


# ----------------------------------------------------------------------------------------
# Workers: XLA in one process (it may abort), hloref in another (it may hang)
# ----------------------------------------------------------------------------------------

def _xla_job(job):
    from jaxlib import xla_client as xc
    kind = job[0]
    if kind == "parse":
        try:
            xc.hlo.hlo_module_from_text(job[1])
            return ("ok", None)
        except Exception as e:
            return ("error", f"{type(e).__name__}: {e}")
    if kind == "run":
        import numpy as np
        from hloref.fuzz.oracles import xla as oracle
        from hloref.fuzz.oracles.errors import OracleError, OracleUnsupported
        text, seed = job[1], job[2]
        note = None
        if len(job) > 3 and job[3] == "logical-bitcasts":
            import hloref
            from hloref.printer import module_to_text
            from logical_bitcasts import rewrite
            module = hloref.parse(text)
            if rewrite(module):
                return ("unsupported", "a bitcast between element types of different widths "
                        "or packed/dynamic shapes: no logical equivalent for XLA:CPU")
            text, note = module_to_text(module), "bitcasts run as transpose/reshape"
        try:
            exe = oracle.compile_hlo(text)
            rng = np.random.default_rng(seed)
            n = exe.replicas * exe.partitions
            if n > 1:  # each device its own inputs (a list of n per parameter)
                args = [[_random_for_xla_shape(s, rng) for _ in range(n)]
                        for s in exe.parameter_shapes]
            else:
                args = [_random_for_xla_shape(s, rng) for s in exe.parameter_shapes]
            for i, bound in (job[4] if len(job) > 4 and job[4] else {}).items():
                args[i] = [_within(a, bound) for a in args[i]] if n > 1 else _within(args[i], bound)
            if _nbytes(args) > MAX_BYTES:
                return ("too-big", f"inputs over {MAX_BYTES >> 20} MiB")
            value = exe.run(*args)
            if _nbytes(value) > MAX_BYTES:
                return ("too-big", f"result over {MAX_BYTES >> 20} MiB")
            oracle.clear_cache()
            return ("ok", (args, value) if note is None else (args, value, note))
        except OracleUnsupported as e:
            return ("unsupported", str(e))
        except OracleError as e:
            return ("error", str(e))
    raise ValueError(kind)


#: Modules whose inputs or result take more than this are not evaluated (the cache and
#: the comparison would hold them several times).
MAX_BYTES = 64 << 20


def _nbytes(value) -> int:
    if isinstance(value, (tuple, list)):
        return sum(_nbytes(v) for v in value)
    return int(getattr(value, "nbytes", 0))


def _within(value, bound: int):
    """A seeded size draw moved into [0, bound] (``value mod (bound + 1)``: the same draws,
    so every other parameter keeps its value)."""
    v = np.asarray(value)
    return np.mod(v, bound + 1).astype(v.dtype)


def bounded_sizes(text: str) -> dict:
    """{entry parameter number: bound} for the scalar integer parameters that are a
    ``set-dimension-size``'s size operand (directly, or through convert/reshape/copy/
    bitcast), with the smallest bound they set: seeded within [0, bound], the op's
    domain (a size above the bound is undefined), in both runs."""
    module = _module(text)
    if module is None:
        return {}
    out: dict = {}
    for instr in module.entry.instructions:
        if instr.opcode != "set-dimension-size" or len(instr.operands) != 2:
            continue
        size = instr.operands[1]
        while size.opcode in ("convert", "reshape", "copy", "bitcast") and size.operands:
            size = size.operands[0]
        dims = tuple(instr.attrs.get("dimensions") or ())
        shape = instr.shape
        if size.opcode != "parameter" or len(dims) != 1 or not hasattr(shape, "dims") or \
                getattr(size.shape, "dims", None) != () or \
                not (size.shape.element_type.is_integer):
            continue
        k = size.parameter_number
        out[k] = min(out.get(k, shape.dims[dims[0]]), shape.dims[dims[0]])
    return out


def _random_for_xla_shape(shape, rng):
    """``hloref.inputs.random_value`` for a shape XLA reports."""
    import numpy as np
    from hloref.inputs import random_value
    from hloref.shapes import ArrayShape
    from hloref.types import from_dtype
    if shape.is_tuple():
        return tuple(_random_for_xla_shape(s, rng) for s in shape.tuple_shapes())
    et = from_dtype(np.dtype(shape.numpy_dtype()))
    dims = tuple(shape.dimensions())
    return random_value(ArrayShape(et, dims, (False,) * len(dims), None), rng)


def _hloref_job(job):
    """Parse, print and reparse; with inputs, evaluate and judge XLA:CPU's value
    (``job[3]``) as ``hloref diff`` does: within the per-type ULP floor is a match;
    otherwise the value must lie inside the numerical envelope (``fuzz/envelope.py``),
    or a documented semantic gap (``fuzz/known_gaps.py``) must explain it."""
    import time as _time

    import hloref
    from hloref.printer import module_to_text
    text, args = job[1], job[2]
    expected = job[3] if len(job) > 3 else None
    out: dict = {}
    try:
        module = hloref.parse(text)
    except hloref.HloError as e:
        return {"parse": "error", "message": str(e).splitlines()[0] if str(e) else type(e).__name__}
    except Exception as e:
        return {"parse": "crash", "message": f"{type(e).__name__}: {e}",
                "traceback": traceback.format_exc(limit=8)}
    out["parse"] = "ok"
    try:
        printed = module_to_text(module)
        out["printed"] = printed
        again = hloref.parse(printed)
        out["reparse"] = "ok" if again == module else "differs"
    except Exception as e:
        out["reparse"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    if args is None:
        return out
    limits = hloref.Limits(max_bytes=4 << 30, max_while_iterations=2_000_000)
    try:
        t0 = _time.perf_counter()
        value = hloref.evaluate(module, *args, limits=limits)
        out["eval_seconds"] = _time.perf_counter() - t0
        out["eval"] = "ok"
    except hloref.HloError as e:
        out["eval"] = type(e).__name__
        out["message"] = str(e).splitlines()[0] if str(e) else type(e).__name__
        return out
    except Exception as e:
        out["eval"] = "crash"
        out["message"] = f"{type(e).__name__}: {e}"
        out["traceback"] = traceback.format_exc(limit=8)
        return out
    if expected is not None:
        try:
            out.update(judge(module, args, expected, value, out["eval_seconds"], limits))
        except Exception as e:
            out["verdict"], out["compare_message"] = "mismatch", \
                f"comparison failed: {type(e).__name__}: {e}"
    return out


#: The envelope costs ``samples`` more evaluations; a module whose evaluation takes
#: longer than ENVELOPE_SECONDS / 8 gets fewer samples (at least MIN_SAMPLES).
ENVELOPE_SECONDS = 40.0
MIN_SAMPLES = 2


def envelope_samples(eval_seconds: float) -> int:
    return max(MIN_SAMPLES, min(8, int(ENVELOPE_SECONDS / max(eval_seconds, 1e-3))))


def judge(module, args, expected, ours, eval_seconds: float, limits) -> dict:
    """XLA:CPU's value ``expected`` against hloref's ``ours`` with the verdict of
    ``hloref diff`` (``fuzz.differential.diff`` with ``oracle_value``): "match"
    (within the per-type ULP floor), "envelope" (inside the numerical envelope only),
    "known-gap" (a documented semantic gap) or "mismatch"."""
    from hloref.fuzz.compare import compare_values
    from hloref.fuzz.differential import diff
    from hloref.fuzz.freedoms import EnvelopePolicy
    from hloref.fuzz.known_gaps import KNOWN_GAPS
    if module.replica_count * module.num_partitions > 1:
        return judge_devices(module, args, expected, ours, eval_seconds, limits)
    plain = compare_values(expected, ours)
    if plain.ok:
        return {"verdict": "match"}
    valid = valid_region(module, expected, ours)
    if valid is not None:  # XLA's padded bound: its region [0:size) is the value
        rec = judge(module, args, valid, ours, eval_seconds, limits)
        if rec["verdict"] in ("match", "envelope"):
            rec["accepted"] = ACCEPTED_PADDED
            rec["compare_message"] = (rec.get("compare_message", "") + " " if rec.get(
                "compare_message") else "") + f"(padded bound: {plain})"
            return rec
    if _unstable_sorts(module):
        ties = judge_sort_ties(module, args, expected, limits)
        if ties is not None and ties[0]:
            return {"verdict": "match", "accepted": ACCEPTED_SORT,
                    "compare_message": f"{ties[1]} ({plain})"}
    samples = envelope_samples(eval_seconds)
    report = diff(module, list(args), oracle_value=expected, localize=False, limits=limits,
                  policy=EnvelopePolicy(samples=samples))
    rec = {"envelope_samples": samples, "compare_message": str(plain)}
    if report.verdict == "match":
        rec["verdict"] = "envelope"
        rec["compare_message"] = f"{report.envelope} ({plain})"
    elif report.verdict == "known-gap":
        rec["verdict"] = "known-gap"
        rec["known_gap"] = f"{report.known_gap}: {KNOWN_GAPS[report.known_gap]}"
    else:
        rec["verdict"] = "mismatch"
        if report.envelope is not None:
            rec["compare_message"] = str(report.envelope)
        elif report.message:
            rec["compare_message"] = f"{report.message} ({plain})"
    return rec


ACCEPTED_PADDED = ("a dynamic result at its padded bound: XLA:CPU's region [0:size) per "
                   "dimension is hloref's value, the rest padding")
ACCEPTED_SORT = ("`sort` without is_stable=true: XLA:CPU's order of the comparator's ties is "
                 "another valid one (its rows a permutation of the input's, each neighbour "
                 "pair ordered by the comparator)")


def _leaves(value) -> list:
    if isinstance(value, (tuple, list)):
        return [x for v in value for x in _leaves(v)]
    return [value]


def _shape_leaves(shape) -> list:
    from hloref.shapes import TupleShape
    if isinstance(shape, TupleShape):
        return [x for s in shape.elements for x in _shape_leaves(s)]
    return [shape]


def _rebuild(like, leaves):
    """``leaves`` (an iterator) in the tuple structure of ``like``."""
    if isinstance(like, (tuple, list)):
        return type(like)(_rebuild(v, leaves) for v in like)
    return next(leaves)


def valid_region(module, expected, ours):
    """XLA:CPU's value ``expected`` cut to the runtime sizes of hloref's ``ours``, where
    they differ only so: a result leaf whose declared shape has bounded dynamic
    dimensions (or whose root is a set-dimension-size of that dimension), XLA's array
    exactly at the bound and hloref's at most the bound in the dynamic dimensions,
    equal in the static ones. jaxlib returns the bound-sized buffer as XLA:CPU writes a
    dynamic result into it: the runtime-sized array densely first (row-major, the
    default layout), then padding with no defined value (seen on every multi-dimensional
    case: dynamic_padder_test.cc:1193, a s32[<=3,<=3] of runtime size 2 x 2, comes
    back as [[-3, -4, 2], [6, pad, pad], ...] for hloref's [[-3, -4], [2, 6]]). So the
    valid region is the first prod(runtime sizes) elements, reshaped to the runtime
    sizes (for one dimension, [0:size)). None when no leaf is cut so, or the
    structures differ otherwise."""
    exp, mine = _leaves(expected), _leaves(ours)
    root = module.entry.root
    shapes = _shape_leaves(root.shape)
    if not (len(exp) == len(mine) == len(shapes)):
        return None
    set_here = set(root.attrs.get("dimensions") or ()) if root.opcode == "set-dimension-size" \
        else set()
    out, cut = [], False
    for e, o, s in zip(exp, mine, shapes):
        e_shape, o_shape = np.shape(e), np.shape(o)
        if e_shape == o_shape:
            out.append(e)
            continue
        dims = getattr(s, "dims", None)
        layout = getattr(s, "layout", None)
        m2m = tuple(getattr(layout, "minor_to_major", None) or ()) if layout else ()
        if dims is None or tuple(e_shape) != tuple(dims) or len(o_shape) != len(dims):
            return None
        if m2m and m2m != tuple(range(len(dims) - 1, -1, -1)):
            return None  # a non-default layout: the dense order is not row-major
        dynamic = [bool(dyn) or k in set_here for k, dyn in enumerate(s.dynamic)]
        if any((n > d) if dyn else (n != d) for n, d, dyn in zip(o_shape, dims, dynamic)):
            return None
        count = int(np.prod(o_shape, dtype=np.int64))
        out.append(np.asarray(e).reshape(-1)[:count].reshape(o_shape))
        cut = True
    return _rebuild(expected, iter(out)) if cut else None


def _unstable_sorts(module) -> list:
    return [i for i in module.entry.instructions
            if i.opcode == "sort" and not i.attrs.get("is_stable")]


def comparator_fn(module, computation, limits=None):
    """``compare(*pairs) -> bool array``: hloref's evaluation of a sort comparator on
    arrays of pairs (lhs0, rhs0, lhs1, rhs1, ...), elementwise where the comparator is
    (``is_vectorizable``), else pair by pair (at most 200,000 pairs)."""
    from hloref.evaluator.interpreter import Interpreter
    from hloref.evaluator.reduce import is_vectorizable
    interp = Interpreter(module, limits=limits)
    vectorized = is_vectorizable(computation, module)

    def compare(*args):
        n = np.shape(args[0])[0] if np.ndim(args[0]) else 1
        if vectorized:
            return np.broadcast_to(np.asarray(interp.call(computation, list(args))), (n,)).astype(bool)
        if n > 200_000:
            raise ValueError(f"a comparator that is not elementwise on {n} pairs")
        return np.array([bool(np.asarray(interp.call(computation, [np.asarray(a[i]) for a in args])))
                         for i in range(n)], dtype=bool)
    return compare


def sort_result_valid(operands, result, dimension: int, compare) -> tuple[bool, str]:
    """Whether ``result`` (one array per operand) is a valid result of ``sort`` of
    ``operands`` along ``dimension`` with comparator ``compare`` when the sort need not
    be stable: in every slice along ``dimension`` (a row: the elements of all operands
    at one position), the result's rows are a permutation of the operands' rows, bit
    for bit, and no row is less than the one before it (``compare(next, prev)`` is
    false for every neighbour pair; for a strict weak ordering exactly the orders that
    differ from the stable sort only among equivalent rows). (ok, why)."""
    if len(operands) != len(result):
        return False, "a different number of outputs"
    for k, (x, y) in enumerate(zip(operands, result)):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape or x.dtype != y.dtype:
            return False, f"output {k}: {y.dtype}{list(y.shape)} for {x.dtype}{list(x.shape)}"
    shape = np.shape(operands[0])
    n = shape[dimension] if shape else 1
    rows = int(np.prod(shape, dtype=np.int64)) // max(n, 1)
    if n <= 1 or rows == 0:
        same = all(np.array_equal(np.asarray(x).view(np.uint8), np.asarray(y).view(np.uint8))
                   for x, y in zip(operands, result))
        return same, "" if same else "a result differs from its only order"

    def flat(x):
        return np.ascontiguousarray(np.moveaxis(np.asarray(x), dimension, -1)).reshape(rows, n)

    def row_bytes(arrays):
        parts = [np.ascontiguousarray(flat(a)).view(np.uint8).reshape(rows, n, -1)
                 for a in arrays]
        b = np.ascontiguousarray(np.concatenate(parts, axis=2))
        return b.view(f"V{b.shape[2]}").reshape(rows, n)

    before, after = row_bytes(operands), row_bytes(result)
    bad = np.nonzero((np.sort(before, axis=1) != np.sort(after, axis=1)).any(axis=1))[0]
    if bad.size:
        return False, f"{bad.size} slice(s) whose rows are not a permutation of the input's"
    args = []
    for y in result:
        f = flat(y)
        args += [f[:, 1:].reshape(-1), f[:, :-1].reshape(-1)]  # compare(next, prev)
    out_of_order = np.asarray(compare(*args)).reshape(-1)
    if out_of_order.any():
        return False, f"{int(out_of_order.sum())} neighbour pair(s) out of the comparator's order"
    return True, f"{rows} slice(s) of {n}: a permutation of the input rows, in order"


def judge_sort_ties(module, args, expected, limits):
    """(ok, why) when the root's outputs come straight from ``sort`` instructions without
    is_stable=true (the root is one, a get-tuple-element of one, or a tuple of those):
    XLA:CPU's outputs, with any output of such a sort the root does not return taken
    from hloref's, must be a valid result of that sort on hloref's operands
    (``sort_result_valid``, the comparator evaluated by hloref); then hloref evaluates
    the module with those sort results in place of its own, and the value must match
    XLA:CPU's within the ULP floor. None when no output comes straight from an
    unstable sort."""
    import hloref
    from hloref.fuzz.compare import compare_values
    from hloref.shapes import TupleShape
    unstable = {id(i) for i in _unstable_sorts(module)}
    root = module.entry.root

    def origin(instr):
        if instr.opcode == "sort" and id(instr) in unstable and not isinstance(instr.shape, TupleShape):
            return (instr, 0)
        if instr.opcode == "get-tuple-element" and id(instr.operands[0]) in unstable:
            return (instr.operands[0], int(instr.attrs.get("index")))
        return None

    if root.opcode == "sort" and id(root) in unstable and isinstance(root.shape, TupleShape):
        origins = [(root, k) for k in range(len(root.operands))]
        leaves = list(expected) if isinstance(expected, (tuple, list)) else None
    elif root.opcode == "tuple":
        origins = [origin(o) for o in root.operands]
        leaves = list(expected) if isinstance(expected, (tuple, list)) else None
    else:
        origins, leaves = [origin(root)], [expected]
    if leaves is None or len(leaves) != len(origins) or not any(origins):
        return None
    visible: dict = {}
    for o, leaf in zip(origins, leaves):
        if o is not None:
            visible.setdefault(id(o[0]), {}).setdefault(o[1], []).append(np.asarray(leaf))
    verdicts: dict = {}

    def replace(comp, instr, operands, value, recompute):
        if comp is not module.entry or id(instr) not in visible:
            return value
        mine = list(value) if isinstance(value, (tuple, list)) else [value]
        theirs = []
        for k, m in enumerate(mine):
            got = visible[id(instr)].get(k)
            if not got:
                theirs.append(np.asarray(m))
                continue
            if any(g.shape != got[0].shape or g.dtype != got[0].dtype or g.tobytes() != got[0].tobytes()
                   for g in got[1:]):
                verdicts[id(instr)] = (False, f"two outputs of %{instr.name} differ")
                return value
            theirs.append(got[0])
        comp_fn = comparator_fn(module, module.computations[str(instr.attrs.get("to_apply"))],
                                limits)
        (d,) = tuple(instr.attrs.get("dimensions"))
        verdicts[id(instr)] = sort_result_valid([np.asarray(x) for x in operands], theirs, d, comp_fn)
        if not verdicts[id(instr)][0]:
            return value
        return tuple(theirs) if isinstance(value, (tuple, list)) else theirs[0]

    try:
        ours = hloref.evaluate(module, *args, limits=limits,
                               interpreter_options=lambda d: {"perturb": replace})
    except Exception as e:  # noqa: BLE001 - no judgement then
        return False, f"evaluation with XLA:CPU's sort results failed: {type(e).__name__}: {e}"
    if len(verdicts) != len(visible):
        return False, "a sort the root returns was not evaluated"
    for ok, why in verdicts.values():
        if not ok:
            return False, why
    plain = compare_values(expected, ours)
    if not plain.ok:
        return False, f"with XLA:CPU's sort results: {plain}"
    return True, "; ".join(why for _, why in verdicts.values())


def judge_devices(module, args, expected, ours, eval_seconds: float, limits) -> dict:
    """``judge`` for a module on N > 1 devices: the N per-device values together, within
    the ULP floor, else inside the envelope of the whole program (every simulated
    device's interpreter perturbed, ``fuzz.perturb.sample_program``), as ``hloref.jax``
    judges shard_map/pmap programs. No known-gap classification (single-device gaps)."""
    import hloref
    from hloref.fuzz.compare import compare_values
    from hloref.fuzz.envelope import Envelope
    from hloref.fuzz.freedoms import EnvelopePolicy
    from hloref.fuzz.perturb import sample_program
    theirs, mine = tuple(expected), tuple(ours)
    plain = compare_values(theirs, mine)
    if plain.ok:
        return {"verdict": "match"}
    samples = envelope_samples(eval_seconds)
    policy = EnvelopePolicy(samples=samples)
    runs = sample_program(lambda hooks: tuple(hloref.evaluate(
        module, *args, limits=limits,
        interpreter_options=lambda d: hooks.interpreter_options(module, f"device{d}"))), policy)
    verdict = Envelope(runs.nominal, runs.samples, policy, module).check(theirs)
    return {"envelope_samples": samples, "verdict": "envelope" if verdict.ok else "mismatch",
            "compare_message": f"{verdict} ({plain})" if verdict.ok else str(verdict)}


def _worker_main(kind: str) -> None:
    from hloref.fuzz.workers import serve
    fn = _xla_job if kind == "xla" else _hloref_job
    serve("ready", lambda job: ("done", fn(job)), glue=lambda message: ("glue", message))


class Worker:
    """A child process running ``_xla_job`` or ``_hloref_job``; restarted when it dies."""

    def __init__(self, kind: str, timeout: float):
        self.kind, self.timeout = kind, timeout
        self.proc = self.conn = None
        self.stderr = open(os.devnull, "wb")

    def _start(self):
        from hloref.fuzz.workers import Channel
        env = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
        if self.kind == "xla":  # multi-device modules run on that many host devices
            env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_"
                                f"count={MAX_DEVICES}").strip()
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", self.kind],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, env=env)
        self.conn = Channel(self.proc.stdout.fileno(), self.proc.stdin.fileno())
        if not self.conn.poll(300):
            raise RuntimeError(f"{self.kind} worker did not start")
        self.conn.recv()

    def kill(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc.stdin.close()
            self.proc.stdout.close()
        self.proc = self.conn = None

    def __call__(self, *job, timeout: float | None = None):
        """("done", result) | ("crash", message) | ("timeout", message) | ("glue", message)."""
        if self.proc is None or self.proc.poll() is not None:
            self.kill()
            self._start()
        try:
            self.conn.send(job)
            if not self.conn.poll(timeout or self.timeout):
                self.kill()
                return ("timeout", f"no answer in {timeout or self.timeout:g} s")
            return self.conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            code = self.proc.wait() if self.proc else None
            self.kill()
            return ("crash", f"the {self.kind} worker died (exit status {code})")

    def close(self):
        if self.conn is not None:
            try:
                self.conn.send(None)
                self.proc.wait(5)
            except Exception:
                pass
        self.kill()


# ----------------------------------------------------------------------------------------
# Scoring
# ----------------------------------------------------------------------------------------

class Cache:
    def __init__(self, path: str | None):
        self.path = path
        if path:
            os.makedirs(path, exist_ok=True)

    def get(self, name: str):
        if not self.path:
            return None
        p = os.path.join(self.path, name)
        if os.path.exists(p):
            with open(p, "rb") as f:
                try:
                    return pickle.load(f)
                except Exception:
                    return None
        return None

    def put(self, name: str, value) -> None:
        if self.path:
            tmp = os.path.join(self.path, name + ".tmp")
            with open(tmp, "wb") as f:
                pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, os.path.join(self.path, name))


def _xla_cached(cache: Cache, xla: Worker, name: str, *job, timeout=None, cached_only=False):
    got = cache.get(name)
    if got is None and cached_only:
        return ("not-attempted", "XLA:CPU was not run on this module (--cached-only)")
    if got is None:
        got = xla(*job, timeout=timeout)
        if got[0] == "glue":  # a bug of this script: do not cache it
            return got
        if got[0] == "done":
            got = got[1]
        else:  # crash / timeout / glue: XLA did not give an answer
            got = (got[0], got[1])
        cache.put(name, got)
    return got


_HEADER_RE = re.compile(r"^\s*HloModule[^\n]*", re.M)
_DEVICES_RE = re.compile(r"\b(?:replica_count|num_partitions)=(\d+)")


def _device_counts(text: str) -> tuple[int, int]:
    module = _module(text)
    if module is not None:
        return module.replica_count, module.num_partitions
    from hloref.fuzz.oracles.xla import device_counts
    return device_counts(text)


def _multi_device(text: str) -> bool:
    """replica_count or num_partitions above 1 in the header (which may span lines)."""
    module = _module(text)
    if module is not None:
        return module.replica_count > 1 or module.num_partitions > 1
    header = _HEADER_RE.search(text)
    return bool(header) and any(int(n) > 1 for n in _DEVICES_RE.findall(header.group()))


#: Collectives with a ``use_global_device_ids`` field (channel_id alone: replica groups
#: across all partitions) and without one (channel_id: partition ids).
_WITH_GLOBAL_IDS_FIELD = ("all-reduce", "all-reduce-start", "all-gather", "all-gather-start",
                          "reduce-scatter", "reduce-scatter-start", "collective-reduce")
_WITHOUT_GLOBAL_IDS_FIELD = ("all-to-all", "all-to-all-start", "collective-permute",
                             "collective-permute-start", "collective-broadcast",
                             "collective-broadcast-start", "ragged-all-to-all")
#: At most this many host devices (the xla worker's --xla_force_host_platform_device_count).
MAX_DEVICES = 16


def devices_for(text: str) -> tuple[int, int] | None:
    """``(replica_count, num_partitions)`` for a module whose collectives are written
    for another device layout than its header declares (the test sets the count in
    C++: ``config.set_replica_count(4)``, ``num_partitions``): the layout, of at most
    MAX_DEVICES devices, on which every collective of the module is consistent
    (``layout_consistent``). Preferred: one keeping the header's counts above 1, then
    the fewest devices, then replicas over partitions (partitions over replicas in a
    module that reads partition-id and not replica-id). None when the header's layout
    is consistent, the module does not parse, or no layout is."""
    module = _module(text)
    if module is None or not _COLLECTIVES.search(text):
        return None
    collectives = [i for _, i in module.instructions()
                   if _collective_opcode(i) in _WITH_GLOBAL_IDS_FIELD + _WITHOUT_GLOBAL_IDS_FIELD]
    if not collectives:
        return None
    R0, P0 = module.replica_count, module.num_partitions
    if layout_consistent(collectives, R0, P0):
        return None
    candidates = [(r, p) for r in range(1, MAX_DEVICES + 1) for p in range(1, MAX_DEVICES + 1)
                  if r * p <= MAX_DEVICES and (r, p) != (R0, P0)]
    # replicas before partitions, unless the module reads partition-id and not
    # replica-id (an SPMD test's layout: collective_pipelining_analyzer_test.cc)
    ops = {i.opcode for _, i in module.instructions()}
    spmd = "partition-id" in ops and "replica-id" not in ops
    candidates.sort(key=lambda rp: (not ((R0 == 1 or rp[0] == R0) and (P0 == 1 or rp[1] == P0)),
                                    rp[0] * rp[1], rp[0] if spmd else rp[1]))
    for r, p in candidates:
        if layout_consistent(collectives, r, p):
            return (r, p)
    return None


def _collective_opcode(instr) -> str:
    """The opcode, or the wrapped one of an ``async-start`` (``reduce-scatter-start``)."""
    if instr.opcode == "async-start" and instr.async_wrapped_opcode:
        return instr.async_wrapped_opcode + "-start"
    return instr.opcode


def layout_consistent(collectives, replicas: int, partitions: int) -> bool:
    """Every collective of ``collectives`` is well formed on ``replicas x partitions``
    devices: on every device its participants, as hloref's evaluator reads them
    (``evaluator/collectives.instruction_participants``: XLA's
    ``GetCollectiveOpGroupMode``, empty groups meaning every replica or partition),
    name devices that exist and include the device itself; an all-gather's result is
    its operand times the group size along ``dimensions``, a reduce-scatter's operand
    its result times the group size; an all-to-all's split dimension divides by the
    group size (its tuple form: one operand per participant); a collective-permute's
    pairs name replicas (partitions with channel_id) that exist."""
    from hloref.errors import HloError
    from hloref.evaluator.collectives import (Device, DeviceIO, _pairs, flag,
                                              instruction_participants, permute_source)
    from hloref.shapes import TupleShape

    def leaves(shape):
        return list(shape.elements) if isinstance(shape, TupleShape) else [shape]

    for d in range(replicas * partitions):
        dev = Device(d // partitions, d % partitions, replicas, partitions, None, DeviceIO())
        for instr in collectives:
            op, attrs = _collective_opcode(instr), instr.attrs
            channel = attrs.get("channel_id")
            try:
                if op.startswith("collective-permute"):
                    permute_source(dev, _pairs(attrs.get("source_target_pairs") or ()), channel)
                    continue
                group = instruction_participants(
                    dev, attrs.get("replica_groups"), channel, attrs.get("use_global_device_ids"),
                    has_global_ids_field=op in _WITH_GLOBAL_IDS_FIELD)
                op = op[:-len("-start")] if op.endswith("-start") else op
            except HloError:
                return False
            if d not in group:
                return False
            groups = getattr(attrs.get("replica_groups"), "groups", None) or ()
            kind = (replicas * partitions if channel is not None and flag(
                    attrs.get("use_global_device_ids")) and op in _WITH_GLOBAL_IDS_FIELD else
                    partitions if channel is not None and op not in _WITH_GLOBAL_IDS_FIELD
                    else replicas)
            if any(not 0 <= v < kind for g in groups for v in g):
                return False
            n = len(group)
            dims = tuple(attrs.get("dimensions") or ())
            operands = [o.shape for o in instr.operands]
            if op in ("all-gather", "reduce-scatter"):
                shape = instr.shape
                if _collective_opcode(instr).endswith("-start") and \
                        isinstance(shape, TupleShape) and len(shape.elements) == 2:
                    shape = shape.elements[1]
                results = leaves(shape)
                if len(dims) != 1 or len(results) < len(operands):
                    continue
                (k,) = dims
                for a, b in zip(operands, results):
                    if not (hasattr(a, "dims") and hasattr(b, "dims")) or k >= len(a.dims) \
                            or k >= len(b.dims):
                        continue
                    if op == "reduce-scatter":
                        a, b = b, a
                    if a.dims[k] * n != b.dims[k]:
                        return False
            elif op == "all-to-all":
                if dims:
                    (k,) = dims
                    if any(k < len(getattr(a, "dims", ())) and a.dims[k] % n for a in operands):
                        return False
                elif len(operands) != n:
                    return False
    return True


def with_devices(text: str, replicas: int, partitions: int) -> str:
    """``text`` with its ``HloModule`` header declaring the device counts."""
    def header(m):
        line = re.sub(r",\s*(replica_count|num_partitions)=\d+", "", m.group(0))
        return re.sub(r"^(\s*HloModule\s+[^\s,]+)",
                      rf"\1, replica_count={replicas}, num_partitions={partitions}", line)
    if not _HEADER_RE.search(text):  # a module without a header (XLA names it)
        return f"HloModule m, replica_count={replicas}, num_partitions={partitions}\n" + text
    return _HEADER_RE.sub(header, text, count=1)


def _write_json(path: str, records: list[dict]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(records, f, indent=1, default=str)
    os.replace(tmp, path)


def score(cases: list[Case], cache: Cache, *, evaluate: bool, seed: int, timeout: float,
          progress: bool = True, xla_only: bool = False, cached_only: bool = False,
          done: dict | None = None, json_path: str | None = None) -> list[dict]:
    """One record per case. ``done``: records of an earlier run by key, kept as they
    are (``--resume``); with ``json_path`` the records so far are written there every
    200 cases, so a run cut short leaves them."""
    xla = Worker("xla", timeout)
    ours = Worker("hloref", timeout)
    records = []
    t0 = time.time()
    try:
        for i, case in enumerate(cases):
            if progress and i % 200 == 0:
                print(f"[{i}/{len(cases)}] {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
                if json_path and i:
                    _write_json(json_path, records)
            if done and case.key in done:
                records.append(done[case.key])
                continue
            rec = {"key": case.key, "where": case.where, "copies": len(case.locations)}
            records.append(rec)
            got = _xla_cached(cache, xla, f"{case.key}.parse", "parse", case.text, timeout=60)
            rec["xla_parse"] = got[0]
            if got[0] != "ok":
                rec["xla_message"] = str(got[1])[:300]
                continue
            run = None
            text, suffix = case.text, ""
            inferred = devices_for(case.text) if evaluate else None
            if inferred:  # collectives for more devices than the header: the test's count
                text, suffix = with_devices(case.text, *inferred), ".devices%dx%d" % inferred
                rec["devices"], rec["devices_inferred"] = "%dx%d" % inferred, True
            elif evaluate and _multi_device(case.text):
                # (a distinct cache name: old runs cached these as one-device answers)
                suffix = ".devices%dx%d" % _device_counts(case.text)
                rec["devices"] = suffix[len(".devices"):]
            if evaluate and rec.get("devices") and \
                    np.prod([int(v) for v in rec["devices"].split("x")]) > MAX_DEVICES:
                run = ("unsupported", f"a module on more than {MAX_DEVICES} devices")
                rec["xla_run"], rec["xla_message"] = run
            elif evaluate:
                sizes = bounded_sizes(case.text)
                if sizes:  # size parameters seeded within their bounds (a new cache name)
                    suffix += ".sizes"
                    rec["seeded_sizes"] = {str(k): v for k, v in sorted(sizes.items())}
                run = _xla_cached(cache, xla, f"{case.key}.run{seed}{suffix}", "run", text, seed,
                                  None, sizes, cached_only=cached_only)
                if run[0] == "unsupported" and "cannot compile `bitcast`" in str(run[1]):
                    # XLA:CPU runs the bitcasts' logical equivalent (ci/logical_bitcasts.py)
                    run = _xla_cached(cache, xla, f"{case.key}.run{seed}{suffix}.logical-bitcasts",
                                      "run", text, seed, "logical-bitcasts", sizes,
                                      cached_only=cached_only)
                    if run[0] == "ok":
                        rec["xla_logical_bitcasts"] = True
                rec["xla_run"] = run[0]
                if run[0] != "ok":
                    rec["xla_message"] = str(run[1]).splitlines()[0][:300] if run[1] else ""
            args = run[1][0] if run and run[0] == "ok" else None
            if xla_only:
                continue
            expected = run[1][1] if args is not None else None
            res = ours("check", text if args is not None else case.text, args, expected)
            if res[0] == "timeout" and args is not None:
                # the evaluation (or its envelope) was slow: parse and print alone
                slow = res[1]
                res = ours("check", text, None, None)
                if res[0] == "done" and res[1].get("parse") == "ok":
                    res[1].update(eval="timeout", message=slow)
            if res[0] != "done":
                rec["hloref_parse"] = res[0]
                rec["hloref_message"] = res[1][:300]
                continue
            res = res[1]
            rec["hloref_parse"] = res["parse"]
            if res["parse"] != "ok":
                rec["hloref_message"] = res["message"][:300]
                if case.where in XLA_PARSER_BUGS:
                    rec["reason"] = XLA_PARSER_BUGS[case.where]
                if "traceback" in res:
                    rec["traceback"] = res["traceback"]
                continue
            rec["reparse"] = res.get("reparse")
            if "printed" in res:
                again = _xla_cached(cache, xla, hashlib.sha256(res["printed"].encode()).hexdigest()[:16]
                                    + ".parse", "parse", res["printed"], timeout=60)
                rec["roundtrip_xla"] = again[0]
                if again[0] != "ok":
                    rec["roundtrip_message"] = str(again[1])[:300]
            if args is None:
                continue
            rec["hloref_eval"] = res.get("eval")
            if res.get("eval") != "ok":
                rec["hloref_message"] = res.get("message", "")[:300]
                if "traceback" in res:
                    rec["traceback"] = res["traceback"]
                if res.get("eval") != "timeout":
                    rec["reason"] = reason_for(rec, case.text)
                continue
            verdict = res.get("verdict", "mismatch")
            rec["verdict"] = verdict
            for k in ("compare_message", "known_gap", "envelope_samples", "eval_seconds",
                      "accepted"):
                if k in res:
                    rec[k] = res[k][:300] if isinstance(res[k], str) else res[k]
            if verdict == "known-gap":
                rec["reason"] = "documented semantic gap (fuzz/known_gaps.py) " + rec["known_gap"]
            elif verdict == "mismatch":
                rec["reason"] = reason_for(rec, case.text)
    finally:
        xla.close()
        ours.close()
    return records


#: Why a module XLA:CPU runs does not get XLA:CPU's answer from hloref, where the
#: difference is understood (docs/semantics.md, "Conformance with XLA's test modules").
#: Rules on the module text / message first, then modules named one by one.
_COLLECTIVES = re.compile(r"\b(all-gather|all-reduce|reduce-scatter|all-to-all|collective-permute|"
                          r"collective-broadcast)(-start)?\(")
REASON_RULES = [
    ("elided", lambda r, t: "data is elided" in r.get("hloref_message", ""),
     "elided constant `{...}`: XLA fills it with garbage, the text holds no value"),
    ("rng", lambda r, t: re.search(r"\brng\(", t) is not None,
     "`rng` draws are implementation-defined"),
    ("devices", lambda r, t: _COLLECTIVES.search(t) is not None and (
        "name device" in r.get("hloref_message", "") or "shape (" in r.get("compare_message", "")
        or "participant(s)" in r.get("hloref_message", "")
        or "source_target_pairs name" in r.get("hloref_message", "")
        or "reshape failed" in r.get("hloref_message", "")) and devices_for(t) is None,
     "collectives no device layout fits (of at most 16 devices, devices_for): the "
     "declared shapes or ids contradict each other on every layout (or need more "
     "devices), and XLA:CPU's value is not defined"),
    ("mismatched", lambda r, t: "mismatched collectives" in r.get("hloref_message", ""),
     "devices take different branches around collectives without a channel_id: which "
     "executions meet is not defined by the semantics (XLA:CPU pairs them in execution "
     "order); hloref pairs them by instruction (by channel where there is one) and "
     "reports the mismatch"),
    ("verifier", lambda r, t: r.get("hloref_eval") == "HloVerifyError",
     "hloref's verifier refuses the module by the XLA HloVerifier rule its message names "
     "(mixed-precision all-reduce, compare type=, a shard count against the replica "
     "groups: tests/test_verifier.py); jaxlib's StableHLO route to XLA:CPU drops what "
     "that rule checks, so XLA:CPU runs it"),
    ("memory", lambda r, t: "MemoryError" in r.get("hloref_message", ""),
     "hloref limitation: an intermediate (a convolution's windows) does not fit in memory"),
    ("domain", lambda r, t: "set-dimension-size: size" in r.get("hloref_message", "") or
     "dynamic-reshape:" in r.get("hloref_message", ""),
     "seeded input outside the op's domain (a dynamic size above its bound): undefined; "
     "hloref raises an error"),
    ("algorithm", lambda r, t: r.get("verdict") == "mismatch" and "algorithm=dot_" in t,
     "XLA:CPU ignores `algorithm=` on dot (computes in f32); hloref rounds the operands "
     "as the algorithm says"),
    ("dynamic-result", lambda r, t: "shape (" in r.get("compare_message", "") and (
        "set-dimension-size" in t or "dynamic-reshape" in t),
     "a result whose runtime size is below its bound: hloref returns it cut to the runtime "
     "size, XLA:CPU (jaxlib) the padded bound"),
    ("unstable-sort", lambda r, t: r.get("verdict") == "mismatch" and re.search(r"\bsort\(", t)
     is not None and "is_stable=true" not in t,
     "`sort` without is_stable=true: the order of equal keys (and so of their values) is "
     "implementation-defined"),
    ("unsupported", lambda r, t: r.get("hloref_eval") == "HloUnsupportedError",
     "hloref limitation: an op or custom-call target hloref does not implement"),
    ("promised-indices", lambda r, t: r.get("verdict") == "mismatch" and re.search(
        r"\b(scatter|gather)\(", t) is not None and re.search(
        r"\b(unique_indices|indices_are_sorted)=true", t) is not None,
     "`unique_indices=true`/`indices_are_sorted=true` with seeded indices that are neither: "
     "implementation-defined (operation_semantics §Scatter, §Gather)"),
    ("non-terminating", lambda r, t: "does not terminate" in r.get("hloref_message", ""),
     "a `while` that never terminates (its body returns unchanged what its condition "
     "reads): no value by the written semantics; XLA's while-loop simplifier removes it "
     "and XLA:CPU returns a value; hloref reports the loop"),
    ("init-identity", lambda r, t: r.get("verdict") == "mismatch" and _init_not_identity(t),
     "reduce/reduce-window init value that is not the reducer's identity (a seeded random "
     "parameter, or e.g. 1 for add): implementation-defined; XLA:CPU folds the init in once "
     "per partial accumulator (or not at all), hloref exactly once"),
    ("fusion-parameter-output", lambda r, t: r.get("verdict") == "mismatch" and
     _fusion_returns_parameter(t),
     "XLA:CPU bug: a multi-output fusion returning one of its parameters in its root tuple "
     "returns garbage for its other outputs "
     "(findings/xla-cpu-jaxlib-0.10.2/fusion-parameter-output-garbage)"),
]
_NON_ASSOCIATIVE = ("reducer that is not associative (`a + 2|b|`): the order of "
                    "application is arbitrary, so the result is implementation-defined")
#: Texts jaxlib 0.10.2's parser accepts by a bug, which XLA's own test expects rejected
#: (as current XLA rejects them); hloref rejects them.
XLA_PARSER_BUGS = {
    "xla/hlo/parser/hlo_parser_test.cc:3556":
        "jaxlib 0.10.2's parser accepts `window={size=1x1 rhs_reversal=1}` by reading past "
        "the end of the rhs_reversal list; the test (WindowRhsReversalWrongSize) expects "
        "a rejection, as current XLA gives; hloref rejects it",
}
#: jaxlib's HLO -> StableHLO route drops the runtime size of a reshape's split dimension.
_SPLIT_RESHAPE = (
    "oracle route: jaxlib's HLO-to-StableHLO conversion drops the runtime size of a reshape "
    "that splits a dynamic dimension (inferred_dimension), so XLA:CPU reshapes the whole "
    "bound; hloref gives what XLA's own C++ test expects (dynamic_padder_test.cc "
    "OutputMinorDimensionReshape: [[2, 4], [10, 12]], where jaxlib gives [[6, 9], [24, 27]]; "
    "tests/test_dynamic_shapes.py checks the test's values)")

#: bf16 operands, integer result: jaxlib 0.10.2 rounds the f32 dot through bf16.
_BF16_TO_INT = (
    "XLA:CPU (jaxlib 0.10.2) rounds the f32 dot/convolution of bf16 operands to bf16 before "
    "converting it to the integer result (its optimized HLO: f32 dot, convert to bf16, "
    "convert to s32), so a sum such as 1.998 becomes 2; XLA's ConvolutionTypeCanonicalizer "
    "defines the op as the f32 result converted (convolution_type_canonicalizer.cc), as "
    "hloref computes (tests/test_ops_reduce_dot.py checks it against XLA:CPU where the "
    "bf16 rounding does not change the integer); not reported (which pass adds the bf16 "
    "rounding is unverified)")

REASON_BY_LOCATION = {
    "xla/tools/hlo_extractor_test.cc:350":
        "hloref limitation: dead code behind get-tuple-element(tuple(a, b), 1): XLA "
        "simplifies it to b and never runs a (an rng-bit-generator with an f32[4] state); "
        "hloref's dead-code pass keeps the whole tuple and refuses the state",
    "xla/service/cpu/cpu_instruction_fusion_test.cc:1341":
        "envelope false alarm: `x - max(x)` is -5.8e-9, not 0, at a row's maximum on "
        "XLA:CPU (the two uses of `multiply(dot, scale)` see differently rounded values); "
        "the envelope gives an instruction one value per run",
    "xla/service/while_loop_simplifier_test.cc:297":
        "hloref limitation: a loop of 2^31 + 43 iterations (42 counts down past the s32 "
        "wrap-around until it is >= 100) exceeds Limits.max_while_iterations; XLA:CPU's "
        "2147483647 is the written semantics' value (by hand)",
    "xla/service/elemental_ir_emitter_test.cc:236":
        "XLA:CPU bug: the c64 constant (nan + inf*i) divided by 1 + i gives (nan, nan); as "
        "parameters, and by C99 Annex G, (inf, inf) "
        "(findings/xla-cpu-jaxlib-0.10.2/divide-c64-constant-infinite-numerator)",
    "xla/service/cpu/tests/cpu_tensordot_oom_test.cc:38":
        "envelope false alarm: a chain of 20 small dots to one scalar, 8 ULP apart "
        "(1.5 envelope widths outside)",
    "xla/service/instruction_fusion_test.cc:982": _NON_ASSOCIATIVE,
    "xla/service/instruction_fusion_test.cc:1004": _NON_ASSOCIATIVE,
    "xla/service/copy_insertion_test.cc:3030":
        "XLA:CPU bug: a scatter whose updates are its own operand is done in place and reads "
        "updates it has already overwritten",
    "xla/backends/gpu/transforms/scatter_slice_simplifier_test.cc:267":
        "XLA:CPU bug: a variadic scatter returns the first combiner result for both outputs "
        "and misplaces in-bounds updates",
    "xla/hlo/transforms/simplifiers/gather_simplifier_test.cc:180":
        "undefined: a gather from an empty operand whose result has elements (XLA:CPU "
        "returns zeros; hloref raises an error)",
    **{f"xla/service/dynamic_padder_test.cc:{line}": _SPLIT_RESHAPE for line in (1318, 1366, 1412)},
    **{f"xla/hlo/transforms/expanders/convolution_type_canonicalizer_test.cc:{line}": _BF16_TO_INT
       for line in (38, 59)},
    "xla/service/dynamic_padder_test.cc:2126":
        "XLA:CPU (jaxlib) folds get-dimension-size of a declared-static dimension to its "
        "bound; XLA's own test expects the runtime size 2, as hloref returns",
}


def _module(text: str):
    import hloref
    try:
        return hloref.parse(text)
    except Exception:
        return None


#: The identity of each simple reducer (operation_semantics §Reduce: "all initial values
#: have to form an identity under computation").
_IDENTITY = {"add": 0, "or": 0, "xor": 0, "multiply": 1, "and": 1,
             "maximum": -np.inf, "minimum": np.inf}


def _init_not_identity(text: str) -> bool:
    """Some reduce/reduce-window has an init value that is not its reducer's identity
    (a seeded random parameter, or a constant such as 1 for add)."""
    module = _module(text)
    if module is None:
        return False
    for _, instr in module.instructions():
        if instr.opcode not in ("reduce", "reduce-window"):
            continue
        n = len(instr.operands) // 2
        comp = module.computations.get(str(instr.attrs.get("to_apply")))
        kinds = _reducer_kinds(comp, n) if comp is not None else [None] * n
        for init, kind in zip(instr.operands[n:], kinds):
            if init.opcode == "parameter":
                return True
            if init.opcode == "constant" and kind in _IDENTITY and init.literal is not None:
                v = np.asarray(init.literal)
                ident = _IDENTITY[kind]
                if v.dtype.kind in "iu" and np.isinf(ident):
                    info = np.iinfo(v.dtype)
                    ident = info.min if ident < 0 else info.max
                if v.dtype == np.bool_:
                    ident = bool(ident) if kind in ("and", "multiply") else False
                if v.size == 1 and v.reshape(()).item() != ident:
                    return True
    return False


def _reducer_kinds(comp, n: int) -> list:
    """The opcode combining each of a reducer's ``n`` outputs, where output ``k`` is
    ``op(param k, param k + n)`` (``simple_reducer`` for one output); else None."""
    from hloref.evaluator.reduce import simple_reducer
    if n == 1:
        return [simple_reducer(comp)]
    root = comp.root
    if root is None or root.opcode != "tuple" or len(root.operands) != n:
        return [None] * n
    numbers = {id(p): p.parameter_number for p in comp.parameters}
    kinds = []
    for k, out in enumerate(root.operands):
        params = sorted(numbers.get(id(o), -1) for o in out.operands)
        kinds.append(out.opcode if len(out.operands) == 2 and params == [k, k + n] else None)
    return kinds


def _fusion_returns_parameter(text: str) -> bool:
    """A fusion whose fused computation returns one of its parameters in its root tuple."""
    module = _module(text)
    if module is None:
        return False
    for _, instr in module.instructions():
        if instr.opcode != "fusion":
            continue
        comp = module.computations.get(str(instr.attrs.get("calls")))
        root = comp.root if comp is not None else None
        if root is not None and root.opcode == "tuple" and any(
                o.opcode == "parameter" for o in root.operands):
            return True
    return False
#: Given by a text rule (bf16/f16 arrays and an accumulating op, a float mismatch), not
#: checked module by module: unverified for each module it names.
_NARROW = ("XLA:CPU keeps bf16/f16 intermediates in f32 (fusion, convert elimination); hloref "
           "rounds every instruction's result to its declared type (assigned by a text rule: "
           "unverified per module)")


def reason_for(r: dict, text: str) -> str | None:
    if r["where"] in REASON_BY_LOCATION:
        return REASON_BY_LOCATION[r["where"]]
    for _, rule, reason in REASON_RULES:
        if rule(r, text):
            return reason
    if r.get("verdict") == "mismatch" and re.search(r"\b(bf16|f16)\[", text) and \
            re.search(r"\b(dot|convolution|reduce|multiply)\(", text) and \
            "integer values differ" not in (r.get("compare_message") or ""):
        # an integer result is not a rounding of bf16 intermediates (it hid a real
        # difference once: convolution_type_canonicalizer_test.cc)
        return _NARROW
    return None


def merge_records(paths: list[str], cases: list[Case]) -> list[dict]:
    """The records of ``paths`` for ``cases`` (later files win), with the multi-device
    rule and the reasons applied again as the current script would."""
    by_key: dict[str, dict] = {}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for r in json.load(f):
                by_key[r["key"]] = r
    records = []
    for case in cases:
        r = by_key.get(case.key)
        if r is None:
            continue
        if r.get("xla_run") == "ok" and r.get("hloref_parse") == "ok" and (
                r.get("hloref_eval") not in ("ok", "timeout") or r.get("verdict") == "mismatch"):
            r["reason"] = reason_for(r, case.text)
        if r.get("hloref_parse") == "error" and r["where"] in XLA_PARSER_BUGS:
            r["reason"] = XLA_PARSER_BUGS[r["where"]]
        records.append(r)
    return records


def _classify(message: str) -> str:
    """A short failure class from an error message (numbers and names stripped)."""
    m = re.sub(r"line \d+, column \d+: ", "", message or "")
    m = re.sub(r"'[^']*'", "'…'", m)
    m = re.sub(r"\d+", "N", m)
    return m[:90]


def summary(records: list[dict], evaluate: bool, source_desc: str) -> str:
    n = len(records)
    accepted = [r for r in records if r["xla_parse"] == "ok"]
    parsed = [r for r in accepted if r.get("hloref_parse") == "ok"]
    bugs = [r for r in accepted if r.get("hloref_parse") == "error" and r["where"] in XLA_PARSER_BUGS]
    parseable = len(accepted) - len(bugs)
    rt_ok = [r for r in parsed if r.get("roundtrip_xla") == "ok" and r.get("reparse") == "ok"]
    lines = ["# Conformance: XLA's HLO test modules", "",
             f"Source: {source_desc}. Reproduce with `python ci/conformance.py <xla checkout or git dir>`"
             " (see the script's docstring).", "",
             "| | modules | share |", "|---|---:|---:|",
             f"| distinct raw-string modules with `ENTRY` | {n} | |",
             f"| accepted by XLA's parser | {len(accepted)} | |",
             f"| … of which XLA's own test expects rejected (jaxlib 0.10.2's parser accepts "
             f"them by a bug; hloref rejects them, as current XLA does) | {len(bugs)} | |",
             f"| parsed by hloref | {len(parsed)} | {100 * len(parsed) / max(parseable, 1):.2f} % "
             f"of the others |",
             f"| printed by hloref, accepted by XLA and reparsed identically | {len(rt_ok)} | "
             f"{100 * len(rt_ok) / max(len(parsed), 1):.2f} % of parsed |"]
    if evaluate:
        attempted = [r for r in accepted if r.get("xla_run") != "not-attempted"]
        lines.append(f"| … of which XLA:CPU was asked to run | {len(attempted)} | |")
        ran = [r for r in accepted if r.get("xla_run") == "ok"]
        ev = [r for r in ran if r.get("hloref_parse") == "ok"]
        match = [r for r in ev if r.get("verdict") == "match"]
        rnd = [r for r in ev if r.get("verdict") == "envelope"]
        logical = sum(1 for r in ran if r.get("xla_logical_bitcasts"))
        lines += [f"| run by XLA:CPU (jaxlib) on seeded inputs | {len(ran)} | |",
                  f"| … of which with `bitcast` run as its logical transpose/reshape "
                  f"(ci/logical_bitcasts.py) | {logical} | |",
                  f"| hloref's value matches XLA:CPU | {len(match) + len(rnd)} | "
                  f"{100 * (len(match) + len(rnd)) / max(len(ran), 1):.2f} % |",
                  f"| … of which inside the numerical envelope only (outside the per-type ULP "
                  f"floor) | {len(rnd)} | |",
                  f"| … of which XLA:CPU's answer is another valid one: an unstable `sort`'s tie "
                  f"order | {sum(1 for r in ev if r.get('accepted') == ACCEPTED_SORT)} | |",
                  f"| … of which XLA:CPU's answer is another valid one: a dynamic result at its "
                  f"padded bound | {sum(1 for r in ev if r.get('accepted') == ACCEPTED_PADDED)} "
                  f"| |"]
        explained = [r for r in ev if r.get("verdict") != "match" and r.get("verdict") != "envelope"
                     and r.get("reason")] + [r for r in ran if r in bugs]
        lines.append(f"| differs for a reason listed below (XLA:CPU bug, implementation-defined, "
                     f"module written for more devices) | {len(explained)} | "
                     f"{100 * len(explained) / max(len(ran), 1):.2f} % |")
        slow = [r for r in ran if r.get("hloref_parse") == "timeout"
                or r.get("hloref_eval") == "timeout"]
        lines.append(f"| hloref's job (parse, print, evaluation, envelope) timed out (`--timeout`) | "
                     f"{len(slow)} | {100 * len(slow) / max(len(ran), 1):.2f} % |")
        unexplained = len(ran) - len(match) - len(rnd) - len(explained) - len(slow)
        lines.append(f"| differs, not understood yet | {unexplained} | "
                     f"{100 * unexplained / max(len(ran), 1):.2f} % |")
    lines.append("")
    groups: dict[str, list] = collections.defaultdict(list)
    for r in accepted:
        if r.get("hloref_parse") != "ok":
            groups["parse: " + _classify(r.get("hloref_message", ""))].append(r)
        elif r.get("roundtrip_xla") not in (None, "ok"):
            groups["round trip (XLA rejects hloref's print): " + _classify(r.get("roundtrip_message", ""))].append(r)
        elif r.get("reparse") != "ok":
            groups["round trip (hloref reparse): " + _classify(str(r.get("reparse")))].append(r)
        elif r.get("xla_run") == "ok" and r.get("hloref_eval") == "timeout":
            groups["hloref's evaluation timed out (parsed and printed)"].append(r)
        elif r.get("xla_run") == "ok" and r.get("hloref_eval") != "ok":
            groups[f"eval {r.get('hloref_eval')}: " + _classify(r.get("hloref_message", ""))].append(r)
        elif r.get("xla_run") == "ok" and r.get("verdict") in ("mismatch", "known-gap"):
            groups["value differs from XLA:CPU"].append(r)
    if groups:
        lines += ["## Remaining failures", "", "| class | count | example |", "|---|---:|---|"]
        for k, rs in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            lines.append(f"| {k.replace('|', '/')} | {len(rs)} | `{rs[0]['where']}` |")
        lines.append("")
    if evaluate:
        differ = [r for r in accepted if r.get("xla_run") == "ok" and r.get("hloref_parse") == "ok"
                  and (r.get("hloref_eval") not in ("ok", "timeout")
                       or r.get("verdict") in ("mismatch", "known-gap"))] + \
            [r for r in bugs if r.get("xla_run") == "ok"]
        if differ:
            lines += ["## Every module XLA:CPU runs where hloref does not give its answer", "",
                      "(`expected` is hloref's value, `got` XLA:CPU's; the reasons are explained in "
                      "docs/semantics.md, section 'Conformance with XLA's test modules')", "",
                      "| reason | modules |", "|---|---:|"]
            by_reason = collections.Counter(r.get("reason") or "**not understood yet**"
                                            for r in differ)
            for k, c in by_reason.most_common():
                lines.append(f"| {k} | {c} |")
            lines += ["", "| module | what happens | reason |", "|---|---|---|"]
            for r in differ:
                what = (r.get("compare_message") if r.get("hloref_eval") == "ok"
                        else f"parse: {r.get('hloref_message', '')}" if r in bugs
                        else f"{r.get('hloref_eval')}: {r.get('hloref_message', '')}")
                lines.append(f"| `{r['where']}` | {str(what)[:140].replace('|', '/')} | "
                             f"{(r.get('reason') or '**not understood yet**')[:60]} |")
            lines.append("")
        not_run = collections.Counter(_classify(r.get("xla_message", ""))[:60] for r in accepted
                                      if r.get("xla_run") != "ok")
        lines += ["## Modules XLA parses but XLA:CPU (through jaxlib) does not run", "",
                  "| reason | count |", "|---|---:|"]
        for k, c in not_run.most_common(25):
            lines.append(f"| {k.replace('|', '/')} | {c} |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("source", nargs="?")
    p.add_argument("--ref", default="main")
    p.add_argument("--cache", default=os.path.join(HERE, "out", "conformance-cache"))
    p.add_argument("--out")
    p.add_argument("--json")
    p.add_argument("--extract-to")
    p.add_argument("--limit", type=int)
    p.add_argument("--only", help="score only modules whose location contains this text")
    p.add_argument("--no-eval", action="store_true")
    p.add_argument("--redo", nargs="+", metavar="JSON",
                   help="score again only the modules XLA:CPU ran whose record in these "
                        "files is not a match (e.g. after a fix; with --cached-only)")
    p.add_argument("--keys", metavar="FILE",
                   help="score only the modules whose text hash (a record's `key`) this "
                        "file lists (a JSON list, or one per line)")
    p.add_argument("--multi-device", action="store_true",
                   help="score only modules on several devices (declared in the header, or "
                        "inferred from their collectives' device ids)")
    p.add_argument("--shard", help="I/N: score every N-th module starting at I")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--xla-only", action="store_true", help="only fill the cache of XLA's answers")
    p.add_argument("--cached-only", action="store_true",
                   help="run XLA:CPU only where its answer is already cached")
    p.add_argument("--resume", action="store_true",
                   help="keep the records already in --json (by text hash) instead of scoring "
                        "those modules again (the file is rewritten every 200 modules)")
    p.add_argument("--merge", nargs="+", metavar="JSON",
                   help="summarise the records of earlier runs (e.g. the --json of each "
                        "--shard; a later file's record replaces an earlier one's) instead "
                        "of scoring; reasons are derived again with the current rules")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        _worker_main(a.worker)
        return 0
    if not a.source or not os.path.isdir(a.source):
        p.error("SOURCE must be an XLA git directory, checkout, or a directory of .hlo files")
    cases = extract(a.source, a.ref)
    cases.sort(key=lambda c: c.where)
    if a.only:
        cases = [c for c in cases if any(a.only in w for w in c.locations)]
    if a.redo:
        redo = set()
        for path in a.redo:
            with open(path, encoding="utf-8") as f:
                for r in json.load(f):
                    if r.get("xla_run") == "ok" and r.get("verdict") not in ("match", "envelope"):
                        redo.add(r["key"])
        cases = [c for c in cases if c.key in redo]
    if a.keys:
        with open(a.keys, encoding="utf-8") as f:
            body = f.read()
        keys = set(json.loads(body) if body.lstrip().startswith("[") else body.split())
        cases = [c for c in cases if c.key in keys]
    if a.multi_device:
        cases = [c for c in cases if _COLLECTIVES.search(c.text) and (
            devices_for(c.text) or _multi_device(c.text))]
    if a.limit:
        cases = cases[:a.limit]
    if a.shard:
        i, n = (int(x) for x in a.shard.split("/"))
        cases = cases[i::n]
    if a.extract_to:
        os.makedirs(a.extract_to, exist_ok=True)
        for c in cases:
            name = re.sub(r"[^A-Za-z0-9_.-]", "_", c.where) + ".hlo"
            with open(os.path.join(a.extract_to, name), "w", encoding="utf-8") as f:
                f.write(c.text)
    if a.merge:
        records = merge_records(a.merge, cases)
    else:
        done = None
        if a.resume and a.json and os.path.exists(a.json):
            with open(a.json, encoding="utf-8") as f:
                done = {r["key"]: r for r in json.load(f)}
        records = score(cases, Cache(a.cache), evaluate=not a.no_eval, seed=a.seed,
                        timeout=a.timeout, xla_only=a.xla_only, cached_only=a.cached_only,
                        done=done, json_path=a.json)
    desc = f"`{a.ref}` of {os.path.basename(os.path.normpath(a.source))}"
    try:
        rev = subprocess.run(["git", f"--git-dir={a.source}", "rev-parse", a.ref], check=True,
                             capture_output=True, text=True).stdout.strip()
        desc = f"XLA test sources at `{a.ref}` = `{rev}`"
    except (subprocess.CalledProcessError, OSError):
        pass
    text = summary(records, not a.no_eval, desc)
    print(text)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    if a.json:
        _write_json(a.json, records)
    accepted = [r for r in records if r["xla_parse"] == "ok"]
    return 0 if all(r.get("hloref_parse") == "ok" for r in accepted) else 1


if __name__ == "__main__":
    sys.exit(main())
