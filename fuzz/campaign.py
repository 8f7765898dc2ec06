"""Fuzz campaigns: generated HLO programs, hloref against an oracle, findings on disk.

**The property.** For a module drawn by ``hloref.fuzz.strategies.modules()`` and
inputs drawn by ``inputs_for(module)``, hloref and the oracle agree under the
comparison policy (``fuzz/compare.py``), or the oracle crashes or hangs (a
finding). ``check_program`` evaluates it and classifies the outcome:

* ``match`` (including differences that per-instruction isolation explains as
  rounding accumulated along the program);
* ``known``: a mismatch whose culprit instruction falls under one of the
  deliberate, documented differences between hloref and XLA:CPU
  (``KNOWN_DIFFERENCES``: flushed subnormals, s4 popcnt, integer power with a
  large exponent, complex special values); counted, never reported;
* ``finding``: mismatch, crash or timeout; reduced with ``reduce_failure``,
  deduplicated by *signature* (blamed pass, opcodes of the reduced module, its
  element types, verdict kind) and written atomically, one directory each;
* ``rejected``: the oracle or hloref refused the module (``error``/``unsupported``
  verdicts: generator/oracle limits, counted by message).

**Runner.** ``hloref fuzz [--time 10m | --examples N] [--oracle xla|tf|both] [--seed S]
[--workers K] [--ops ...] [--out DIR] [--db DIR] [--json-summary FILE] [--junit FILE]``.
Each of the K worker processes owns its own ``OracleWorker`` and runs Hypothesis in
batches; the parent aggregates per-worker statistics files and prints progress (a
status line on a TTY, plain periodic lines otherwise) and a summary at the end.
Exit status 1 when the run wrote new findings, 0 otherwise.

**Resuming.** ``DIR/campaign.json`` holds the totals; every finding is first
written as ``DIR/pending/<key>`` (unreduced, atomic) and then reduced into
``DIR/<name>``, so a killed campaign loses none: rerunning with the same ``--out``
reduces what was pending and carries on from the recorded example count (new
Hypothesis seeds, the same totals).

**Example database.** ``--db DIR`` is a ``DirectoryBasedExampleDatabase``
(Hypothesis replays stored examples first; ``target()`` on the observed error in
ULPs keeps the pareto front there too). To share it across CI runs, read the
database another workflow uploaded as an artifact and write locally::

    from hypothesis.database import (DirectoryBasedExampleDatabase,
        GitHubArtifactDatabase, MultiplexedDatabase, ReadOnlyDatabase)
    db = MultiplexedDatabase(
        DirectoryBasedExampleDatabase(".hypothesis/hloref-fuzz"),
        ReadOnlyDatabase(GitHubArtifactDatabase("OWNER", "REPO",
                                                artifact_name="hloref-fuzz-db")))

(``--db-github OWNER/REPO`` builds exactly that; the nightly workflow uploads
``.hypothesis/hloref-fuzz`` as the ``hloref-fuzz-db`` artifact, and needs
``GITHUB_TOKEN`` with ``actions: read`` to download it.)

**Other drivers.** ``fuzz_one_input(buffer)`` runs the property on one byte string
(HypoFuzz, Atheris: ``atheris.Setup(sys.argv, fuzz_one_input)``); it raises
``AssertionError`` on a finding that is not a known difference.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from .report import _leaves  # arrays of a value, depth first

__all__ = ["Outcome", "check_program", "known_difference", "KNOWN_DIFFERENCES", "signature",
           "reduce_and_write", "run_campaign", "replay", "fuzz_one_input", "test_hlo_property",
           "add_fuzz_commands", "CampaignOptions", "Stats", "parse_duration"]

#: Deliberate differences between hloref and XLA:CPU (jaxlib 0.10.2) that the campaign
#: counts but never reports; see ``tests/hlo_builders.py`` KNOWN_DIFFERENCES and
#: ``docs/semantics.md``. Each entry: (name, description).
KNOWN_DIFFERENCES = {
    "ftz": "XLA:CPU flushes subnormal inputs and results to zero (FTZ/DAZ at run time); "
           "hloref keeps them (the culprit's operands or hloref's result hold subnormals)",
    "popcnt-s4": "XLA:CPU counts the 8 bits of the sign-extended storage byte of s4",
    "int-power": "XLA:CPU's integer power looks at the low 6 bits of the exponent only",
    "complex-special": "XLA:CPU's complex functions do not follow C99 Annex G for inf/NaN "
                       "components and overflow for huge magnitudes",
    "accumulation-overflow": "an accumulating op (dot, convolution, reduce) whose terms "
                             "overflow the element type: hloref accumulates in f64 and rounds "
                             "once (inf), XLA accumulates in the type (inf - inf = NaN); the "
                             "accumulation precision is implementation-defined",
    "complex-normwise": "a complex result whose error is within the ULP budget of its "
                        "magnitude |z| but not of one tiny component (XLA:CPU's complex "
                        "functions are accurate normwise, the policy compares componentwise)",
}

_ACCUMULATING = frozenset({"dot", "convolution", "reduce", "reduce-window", "batch-norm-training",
                           "batch-norm-inference", "batch-norm-grad", "select-and-scatter"})

_STRUCTURAL = frozenset({"parameter", "constant", "tuple", "get-tuple-element"})


# --------------------------------------------------------------------------- the property


@dataclass
class Outcome:
    """What ``check_program`` concluded about one program."""

    kind: str  # match, known, finding, rejected
    verdict: str  # the DiffReport verdict
    report: object = None
    known: str | None = None
    message: str = ""
    score: float = 0.0  # log2(1 + max ulp) of the final comparison, for target()


def _has_subnormal(value) -> bool:
    from hloref.types import from_dtype
    for leaf in _leaves(value):
        try:
            et = from_dtype(leaf.dtype)
        except KeyError:
            continue
        if not (et.is_float or et.is_complex) or leaf.size == 0:
            continue
        parts = [leaf] if et.is_float else [np.real(leaf), np.imag(leaf)]
        fmt = et.float_format if et.is_float else from_dtype(np.real(leaf).dtype).float_format
        tiny = 2.0 ** (1 - fmt.bias)
        for p in parts:
            a = np.abs(p.astype(np.float64))
            if np.any((a > 0) & (a < tiny)):
                return True
    return False


def known_difference(report) -> str | None:
    """The ``KNOWN_DIFFERENCES`` key that explains a mismatch, or ``None``."""
    culprit = report.culprit.innermost() if getattr(report, "culprit", None) else None
    if culprit is None:
        # unlocalized: subnormals anywhere in hloref's values explain it as FTZ
        if _has_subnormal(report.expected) or _has_subnormal(report.actual):
            return "ftz"
        return None
    ops = culprit.operands
    if any(_has_subnormal(o) for o in ops) or _has_subnormal(culprit.expected) \
            or _has_subnormal(culprit.actual):
        return "ftz"
    leaves = [x for o in ops for x in _leaves(o)]
    if culprit.opcode == "popcnt" and leaves and leaves[0].dtype.name == "int4":
        return "popcnt-s4"
    if culprit.opcode == "power" and len(leaves) == 2 and leaves[1].dtype.kind in "iu":
        e = leaves[1].astype(np.int64)
        if np.any(e >= 64) or np.any(e < 0):
            return "int-power"
    if culprit.opcode in _ACCUMULATING and all(np.all(np.isfinite(x)) for x in leaves
                                                if x.dtype.kind in "fc" or x.dtype.kind == "V"):
        nonfinite = [x for x in list(_leaves(culprit.expected)) + list(_leaves(culprit.actual))
                     if x.dtype.kind not in "biu" and not np.all(np.isfinite(
                         x.astype(np.complex128) if x.dtype.kind == "c" else
                         x.astype(np.float64)))]
        if nonfinite:
            return "accumulation-overflow"
    if _complex_normwise_ok(culprit):
        return "complex-normwise"
    if any(x.dtype.kind == "c" for x in leaves):
        for x in leaves:
            if x.dtype.kind == "c" and x.size and (
                    not np.all(np.isfinite(x)) or np.max(np.abs(x)) > 1e15):
                return "complex-special"
    return None


def _complex_normwise_ok(culprit) -> bool:
    """Complex results that agree within the budget measured against |z|."""
    from .compare import tolerance_for, ulp_of
    from hloref.types import from_dtype
    exp, act = list(_leaves(culprit.expected)), list(_leaves(culprit.actual))
    if not exp or len(exp) != len(act) or not any(e.dtype.kind == "c" for e in exp):
        return False
    for e, a in zip(exp, act):
        if e.dtype.kind != "c":
            continue
        et = from_dtype(e.dtype)
        comp = from_dtype(np.real(e).dtype)
        e128, a128 = e.astype(np.complex128), a.astype(np.complex128)
        if not (np.all(np.isfinite(e128)) and np.all(np.isfinite(a128))):
            return False
        tol = tolerance_for(et, culprit.opcode)
        allowed = (tol.ulps + 1) * ulp_of(np.abs(e128), comp)
        if np.any(np.abs(e128 - a128) > allowed):
            return False
    return True


def check_program(module, args, worker, *, oracle: str = "xla", timeout: float = 60.0) -> Outcome:
    """Run the property on one program; never raises for a mismatch or a crash."""
    from .differential import diff
    report = diff(module, args, oracle=oracle, worker=worker, timeout=timeout)
    v = report.verdict
    score = 0.0
    if report.comparison is not None and not report.comparison.ok:
        mu = report.comparison.max_ulp
        score = math.log2(1.0 + (mu if np.isfinite(mu) else 2.0 ** 64))
    if v == "match":
        return Outcome("match", v, report, score=score)
    if v == "known-gap":  # a documented implementation-defined difference (compare.KNOWN_GAPS)
        return Outcome("known", v, report, known=report.known_gap, score=score)
    if v in ("error", "unsupported"):
        return Outcome("rejected", v, report, message=report.message)
    if v == "mismatch":
        known = known_difference(report)
        if known:
            return Outcome("known", v, report, known=known, score=score)
    return Outcome("finding", v, report, message=report.message, score=score)


# --------------------------------------------------------------------------- findings


def _module_types(module) -> list[str]:
    from hloref.shapes import ArrayShape, flatten_shape
    types = set()
    for _, instr in module.instructions():
        for s in flatten_shape(instr.shape):
            if isinstance(s, ArrayShape):
                types.add(s.element_type.name)
    return sorted(types)


def _module_opcodes(module) -> list[str]:
    return sorted({i.opcode for _, i in module.instructions() if i.opcode not in _STRUCTURAL})


def signature(module, verdict: str, blamed_pass: str | None) -> dict:
    """The deduplication key of a (reduced) finding."""
    return {"blamed_pass": blamed_pass, "opcodes": _module_opcodes(module),
            "element_types": _module_types(module), "verdict": verdict}


def _sig_key(sig: dict) -> str:
    return hashlib.sha256(json.dumps(sig, sort_keys=True).encode()).hexdigest()[:12]


def _pre_key(report, module, oracle) -> str:
    """Cheap key before reduction: verdict, culprit opcode and its types (or the
    module's opcodes for crashes), so duplicates are not reduced again."""
    c = report.culprit.innermost() if report.culprit else None
    if c is not None:
        types = sorted({x.dtype.name for o in c.operands for x in _leaves(o)})
        basis = [oracle, report.verdict, c.opcode, types]
    else:
        basis = [oracle, report.verdict, _module_opcodes(module), _module_types(module)]
    return hashlib.sha256(json.dumps(basis).encode()).hexdigest()[:12]


def _claim(path: str) -> bool:
    """Create ``path`` exclusively (atomic across processes); False if it exists."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def reduce_and_write(module, values, report, worker, out_dir: str, *, oracle: str = "xla",
                     seed=None, blame: bool = True, extra_meta: dict | None = None,
                     still_fails=None) -> tuple[str, dict, bool]:
    """Reduce a failing program, blame a pass (xla mismatches), write the finding.

    The shared form of ``hloref diff --reduce``: returns ``(directory, signature,
    new)``; ``new`` is False when a finding with the same signature exists (its
    directory is returned and nothing is written). ``still_fails(report)`` may veto a
    reduction step (default: the same verdict, blamed on the same opcode)."""
    from .differential import diff
    from .reduce import reduce_failure
    from .report import markdown_report, write_finding

    want = report.culprit.innermost().opcode if report.culprit else None

    def fails(m, a) -> bool:
        r = diff(m, a, oracle=oracle, worker=worker)
        if r.verdict != report.verdict:
            return False
        if still_fails is not None and not still_fails(r):
            return False
        return want is None or (r.culprit is not None and r.culprit.innermost().opcode == want)

    try:
        small, small_args = reduce_failure(module, values, fails)
    except Exception:  # noqa: BLE001 - keep the unreduced program rather than lose it
        import hloref
        small, small_args = hloref.parse(module.to_text()), list(values)
    final = diff(small, small_args, oracle=oracle, worker=worker)
    if final.verdict != report.verdict:  # reduction lost it (flaky oracle): keep the original
        import hloref
        small, small_args = hloref.parse(module.to_text()), list(values)
        final = diff(small, small_args, oracle=oracle, worker=worker)
    blamed = None
    confirmed = None
    text = small.to_text()
    if blame and oracle == "xla" and final.verdict == "mismatch":
        try:
            from .blame import blame as run_blame
            b = run_blame(text, small_args, worker)
            blamed, confirmed = b.pass_name, b.confirmed
        except Exception:  # noqa: BLE001 - blame is best effort
            pass
    sig = signature(small, final.verdict, blamed)
    key = _sig_key(sig)
    culprit = final.culprit.innermost() if final.culprit else None
    name = f"{final.verdict}-{culprit.opcode if culprit else 'module'}-{key}"
    path = os.path.join(out_dir, name)
    if os.path.exists(path):
        return path, sig, False
    title = (f"XLA:CPU {final.verdict} in `{culprit.opcode}`" if culprit
             else f"{oracle} {final.verdict} on a {len(small.entry.instructions)}-instruction module")
    md = markdown_report(title=title, verdict=final.verdict, module_text=text, inputs=small_args,
                         expected=final.expected, actual=final.actual, summary=final.summary(),
                         blamed_pass=blamed, blame_confirmed=confirmed, seed=seed, oracle=oracle,
                         debug_options=final.debug_options)
    meta = {"verdict": final.verdict, "oracle": oracle, "seed": seed,
            "debug_options": final.debug_options,
            "culprit": culprit and {"opcode": culprit.opcode, "instruction": culprit.name},
            "blamed_pass": blamed, "blame_confirmed": confirmed,
            "instructions": len(small.entry.instructions), "signature": sig,
            "signature_key": key, "message": final.message, **(extra_meta or {})}
    write_finding(path, module_text=text, inputs=small_args, expected=final.expected,
                  actual=final.actual, report_md=md, meta=meta)
    return path, sig, True


def _write_pending(out_dir: str, key: str, module, args, meta: dict) -> str:
    from .report import _save_npz
    pending = os.path.join(out_dir, "pending")
    os.makedirs(pending, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".pending-", dir=pending)
    with open(os.path.join(tmp, "module.hlo"), "w", encoding="utf-8") as f:
        f.write(module.to_text())
    _save_npz(os.path.join(tmp, "inputs.npz"), tuple(args))
    with open(os.path.join(tmp, "meta.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, default=str)
    final = os.path.join(pending, key)
    if os.path.exists(final):
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
        return final
    os.replace(tmp, final)
    return final


def _load_program(directory: str):
    import hloref
    from hloref.api import coerce_argument
    from hloref.cli import read_npz, unflatten_arguments
    with open(os.path.join(directory, "module.hlo"), encoding="utf-8") as f:
        module = hloref.parse(f.read())
    arrays = read_npz(os.path.join(directory, "inputs.npz"))
    params = module.entry.parameters
    values = unflatten_arguments(arrays, [p.shape for p in params])
    values = [coerce_argument(v, p.shape, f"argument {i}") for i, (v, p) in
              enumerate(zip(values, params))]
    return module, values


# --------------------------------------------------------------------------- statistics


@dataclass
class Stats:
    programs: int = 0
    instructions: int = 0
    seconds: float = 0.0
    oracle_seconds: float = 0.0
    hloref_seconds: float = 0.0
    generator_seconds: float = 0.0
    reduce_seconds: float = 0.0
    opcodes: Counter = field(default_factory=Counter)
    element_types: Counter = field(default_factory=Counter)
    outcomes: Counter = field(default_factory=Counter)
    verdicts: Counter = field(default_factory=Counter)
    known: Counter = field(default_factory=Counter)
    rejected: Counter = field(default_factory=Counter)
    findings: list = field(default_factory=list)  # directories written by this run
    duplicates: int = 0

    def add_program(self, module) -> None:
        from hloref.shapes import ArrayShape, flatten_shape
        self.programs += 1
        for _, instr in module.instructions():
            self.instructions += 1
            self.opcodes[instr.opcode] += 1
            for s in flatten_shape(instr.shape):
                if isinstance(s, ArrayShape):
                    self.element_types[s.element_type.name] += 1

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        for k in ("opcodes", "element_types", "outcomes", "verdicts", "known", "rejected"):
            d[k] = dict(getattr(self, k))
        return d

    @classmethod
    def from_json(cls, d: dict) -> "Stats":
        s = cls()
        for k, v in d.items():
            if k in ("opcodes", "element_types", "outcomes", "verdicts", "known", "rejected"):
                setattr(s, k, Counter(v))
            elif hasattr(s, k):
                setattr(s, k, v)
        return s

    def merge(self, other: "Stats") -> None:
        for k in ("programs", "instructions", "oracle_seconds", "hloref_seconds",
                  "generator_seconds", "reduce_seconds", "duplicates"):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        for k in ("opcodes", "element_types", "outcomes", "verdicts", "known", "rejected"):
            getattr(self, k).update(getattr(other, k))
        self.findings.extend(f for f in other.findings if f not in self.findings)


def _atomic_json(path: str, data) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(os.path.abspath(path)))
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, default=str)
    os.replace(tmp, path)


# --------------------------------------------------------------------------- campaign


@dataclass
class CampaignOptions:
    out: str = "fuzz-findings"
    oracles: tuple = ("xla",)
    seed: int = 0
    examples: int | None = None
    seconds: float | None = None
    workers: int = 1
    ops: list | None = None
    db: str | None = None
    db_github: str | None = None
    max_instructions: int = 12
    timeout: float = 60.0
    batch: int = 10
    blame: bool = True
    progress_every: float = 10.0
    json_summary: str | None = None
    junit: str | None = None
    worker_factory: object = None  # tests: callable(oracle) -> an OracleWorker-like object
    quiet: bool = False


def _database(opts: CampaignOptions):
    from hypothesis.database import (DirectoryBasedExampleDatabase, GitHubArtifactDatabase,
                                     MultiplexedDatabase, ReadOnlyDatabase)
    if not opts.db and not opts.db_github:
        return None
    local = DirectoryBasedExampleDatabase(opts.db or os.path.join(opts.out, ".hypothesis"))
    if opts.db_github:
        owner, _, repo = opts.db_github.partition("/")
        return MultiplexedDatabase(local, ReadOnlyDatabase(GitHubArtifactDatabase(
            owner, repo, artifact_name="hloref-fuzz-db")))
    return local


class _Runner:
    """One worker's loop: Hypothesis batches, the property, findings, statistics."""

    def __init__(self, opts: CampaignOptions, index: int, start_examples: int,
                 quota: int | None, deadline: float | None):
        self.opts = opts
        self.index = index
        self.quota = quota
        self.deadline = deadline
        self.stats = Stats()
        self.done = 0
        self.start_examples = start_examples
        self.workers: dict = {}
        self.stats_path = os.path.join(opts.out, ".stats", f"worker-{index}.json")
        self._last_flush = 0.0
        self._t_mark = time.perf_counter()

    def worker(self, oracle: str):
        if oracle not in self.workers:
            if self.opts.worker_factory is not None:
                self.workers[oracle] = self.opts.worker_factory(oracle)
            else:
                from .workers import OracleWorker
                self.workers[oracle] = OracleWorker(oracle, timeout=self.opts.timeout)
        return self.workers[oracle]

    def close(self) -> None:
        for w in self.workers.values():
            try:
                w.close()
            except Exception:  # noqa: BLE001
                pass

    def flush(self, force: bool = False) -> None:
        now = time.perf_counter()
        if force or now - self._last_flush > 1.0:
            self._last_flush = now
            _atomic_json(self.stats_path, {"stats": self.stats.to_json(), "done": self.done,
                                           "index": self.index})

    def out_of_budget(self) -> bool:
        if self.deadline is not None and time.time() >= self.deadline:
            return True
        return self.quota is not None and self.done >= self.quota

    def handle(self, module, args, oracle: str, seed_info) -> Outcome:
        worker = self.worker(oracle)
        w0 = getattr(worker, "seconds", 0.0)
        try:
            outcome = check_program(module, args, worker, oracle=oracle, timeout=self.opts.timeout)
        except Exception as exc:  # noqa: BLE001 - a bug in hloref/diff: count it, go on
            self.stats.outcomes["internal-error"] += 1
            self.stats.rejected[f"internal error: {type(exc).__name__}: {exc}"[:120]] += 1
            self._save_internal_error(module, args, oracle, exc)
            return Outcome("rejected", "error", message=str(exc))
        self.stats.oracle_seconds += getattr(worker, "seconds", 0.0) - w0
        if outcome.report is not None:
            self.stats.hloref_seconds += getattr(outcome.report, "hloref_seconds", 0.0)
        self.stats.outcomes[outcome.kind] += 1
        self.stats.verdicts[outcome.verdict] += 1
        if outcome.kind == "known":
            self.stats.known[outcome.known] += 1
        elif outcome.kind == "rejected":
            self.stats.rejected[(outcome.message or "").splitlines()[0][:120]
                                if outcome.message else outcome.verdict] += 1
        elif outcome.kind == "finding":
            try:
                self.record(module, args, outcome, oracle, seed_info)
            except Exception as exc:  # noqa: BLE001 - a campaign never dies on one program
                self.stats.outcomes["internal-error"] += 1
                print(f"hloref fuzz: could not record a finding: {type(exc).__name__}: {exc}",
                      file=sys.stderr)
        return outcome

    def _save_internal_error(self, module, args, oracle: str, exc: Exception) -> None:
        """Keep what hloref failed on, as ``internal-errors/KEY/`` with ``module.hlo`` and
        ``inputs.npz`` (the layout of a pending finding) and ``traceback.txt``, so the
        bug can be reproduced; never raises."""
        import traceback

        from .report import _save_npz
        try:
            text = module.to_text()
            key = hashlib.sha256(text.encode()).hexdigest()[:12]
            where = os.path.join(self.opts.out, "internal-errors", key)
            os.makedirs(where, exist_ok=True)
            with open(os.path.join(where, "module.hlo"), "w", encoding="utf-8") as f:
                f.write(text)
            _save_npz(os.path.join(where, "inputs.npz"), tuple(args))
            with open(os.path.join(where, "traceback.txt"), "w", encoding="utf-8") as f:
                f.write(f"oracle: {oracle}\n")
                f.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
        except Exception:  # noqa: BLE001 - best effort; the count is already taken
            pass

    def record(self, module, args, outcome: Outcome, oracle: str, seed_info) -> None:
        t0 = time.perf_counter()
        report = outcome.report
        key = _pre_key(report, module, oracle)
        if not _claim(os.path.join(self.opts.out, ".seen", key)):
            self.stats.duplicates += 1
            return
        meta = {"oracle": oracle, "verdict": outcome.verdict, "seed": seed_info, "key": key}
        pending = _write_pending(self.opts.out, key, module, args, meta)
        path = self.reduce_pending(pending)
        if path:
            self.stats.findings.append(path)
        self.stats.reduce_seconds += time.perf_counter() - t0

    def reduce_pending(self, pending: str) -> str | None:
        import shutil
        from .differential import diff
        with open(os.path.join(pending, "meta.json"), encoding="utf-8") as f:
            meta = json.load(f)
        oracle = meta["oracle"]
        module, values = _load_program(pending)
        worker = self.worker(oracle)
        report = diff(module, values, oracle=oracle, worker=worker, timeout=self.opts.timeout)
        if report.verdict not in ("mismatch", "crash", "timeout") or (
                report.verdict == "mismatch" and known_difference(report)):
            shutil.rmtree(pending, ignore_errors=True)  # does not reproduce from disk
            return None

        def still(r):
            return not (r.verdict == "mismatch" and known_difference(r))

        path, _sig, new = reduce_and_write(
            module, values, report, worker, self.opts.out, oracle=oracle, seed=meta.get("seed"),
            blame=self.opts.blame, extra_meta={"campaign_key": meta.get("key")},
            still_fails=still)
        shutil.rmtree(pending, ignore_errors=True)
        if not new:
            self.stats.duplicates += 1
            return None
        return path

    def resume_pending(self) -> None:
        pending = os.path.join(self.opts.out, "pending")
        if not os.path.isdir(pending):
            return
        for name in sorted(os.listdir(pending)):
            if name.startswith("."):
                continue
            # one worker takes each pending finding
            if not _claim(os.path.join(self.opts.out, ".resumed", name)):
                continue
            try:
                path = self.reduce_pending(os.path.join(pending, name))
            except Exception as exc:  # noqa: BLE001
                print(f"hloref fuzz: could not reduce pending {name}: {exc}", file=sys.stderr)
                continue
            if path:
                self.stats.findings.append(path)

    def run(self) -> Stats:
        from hypothesis import HealthCheck, Phase, given, settings
        from hypothesis import seed as hseed
        from hypothesis import strategies as st
        from hypothesis import target

        from .strategies import inputs_for, modules

        opts = self.opts
        strat = modules(ops=opts.ops, max_instructions=opts.max_instructions)
        db = _database(opts)
        t_start = time.perf_counter()
        self.resume_pending()
        batch_no = 0
        try:
            while not self.out_of_budget():
                batch_seed = hash_seed(opts.seed, self.index, self.start_examples, batch_no)
                batch_no += 1
                n = opts.batch if self.quota is None else min(opts.batch, self.quota - self.done)
                if n <= 0:
                    break

                @settings(max_examples=n, deadline=None, database=db,
                          suppress_health_check=list(HealthCheck),
                          phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target],
                          report_multiple_bugs=False, print_blob=False)
                @hseed(batch_seed)
                @given(strat, st.data())
                def prop(module, data):
                    if self.out_of_budget():
                        return
                    args = data.draw(inputs_for(module))
                    t_gen = time.perf_counter()
                    self.stats.generator_seconds += t_gen - self._t_mark
                    self.stats.add_program(module)
                    self.done += 1
                    worst = 0.0
                    for oracle in opts.oracles:
                        outcome = self.handle(module, args, oracle,
                                              {"batch_seed": batch_seed, "mode": args.mode,
                                               "input_seed": args.seed})
                        worst = max(worst, outcome.score)
                    target(worst, label="log2(1 + max ulp error)")
                    self.flush()
                    self._t_mark = time.perf_counter()

                self._t_mark = time.perf_counter()
                prop()
        finally:
            self.stats.seconds = time.perf_counter() - t_start
            self.flush(force=True)
            self.close()
        return self.stats


def hash_seed(*parts) -> int:
    return int(hashlib.sha256(repr(parts).encode()).hexdigest()[:8], 16)


def _worker_main(opts: CampaignOptions, index: int, start_examples: int, quota, deadline) -> None:
    runner = _Runner(opts, index, start_examples, quota, deadline)
    runner.run()


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``10m``, ``1h30m`` → seconds."""
    import re
    text = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    total, pos = 0.0, 0
    for m in re.finditer(r"(\d+(?:\.\d+)?)([hms])", text):
        if m.start() != pos:
            raise ValueError(f"bad duration {text!r}")
        total += float(m.group(1)) * {"h": 3600, "m": 60, "s": 1}[m.group(2)]
        pos = m.end()
    if pos != len(text) or not text:
        raise ValueError(f"bad duration {text!r} (use e.g. 90s, 10m, 1h)")
    return total


def _aggregate(out: str, base: Stats) -> Stats:
    total = Stats.from_json(base.to_json())
    d = os.path.join(out, ".stats")
    if os.path.isdir(d):
        for name in sorted(os.listdir(d)):
            if name.startswith("worker-") and name.endswith(".json"):
                try:
                    with open(os.path.join(d, name), encoding="utf-8") as f:
                        s = Stats.from_json(json.load(f)["stats"])
                except (OSError, ValueError, KeyError):
                    continue
                seconds = total.seconds
                total.merge(s)
                total.seconds = seconds
    return total


def _progress_line(s: Stats, elapsed: float, reachable: int) -> str:
    rate = s.programs / elapsed if elapsed > 0 else 0.0
    irate = s.instructions / elapsed if elapsed > 0 else 0.0
    return (f"[{elapsed:6.0f}s] programs {s.programs} ({rate:.2f}/s), instructions "
            f"{s.instructions} ({irate:.0f}/s), opcodes {len(s.opcodes)}/{reachable}, types "
            f"{len(s.element_types)}, findings {len(s.findings)} (+{s.duplicates} dup), "
            f"known {sum(s.known.values())}, rejected {sum(s.rejected.values())}")


def run_campaign(opts: CampaignOptions) -> dict:
    """Run a campaign; returns the summary (also written to ``--json-summary``)."""
    import multiprocessing as mp
    import shutil

    from .strategies import reachable_opcodes
    os.makedirs(opts.out, exist_ok=True)
    state_path = os.path.join(opts.out, "campaign.json")
    previous = Stats()
    start_examples = 0
    if os.path.exists(state_path):
        with open(state_path, encoding="utf-8") as f:
            state = json.load(f)
        previous = Stats.from_json(state.get("totals", {}))
        start_examples = int(state.get("examples_started", 0))
    # fold stats left by a killed run into the totals, then start clean
    stats_dir = os.path.join(opts.out, ".stats")
    leftover = _aggregate(opts.out, Stats())
    if leftover.programs:
        previous.merge(leftover)
        start_examples += leftover.programs
    shutil.rmtree(stats_dir, ignore_errors=True)
    shutil.rmtree(os.path.join(opts.out, ".resumed"), ignore_errors=True)
    existing = {n for n in os.listdir(opts.out) if not n.startswith(".")}
    deadline = time.time() + opts.seconds if opts.seconds else None
    k = max(1, opts.workers)
    if opts.examples is None and opts.seconds is None:
        opts.examples = 100
    quotas = [None] * k
    if opts.examples is not None:
        quotas = [opts.examples // k + (1 if i < opts.examples % k else 0) for i in range(k)]
    _atomic_json(state_path, {"seed": opts.seed, "examples_started": start_examples,
                              "totals": previous.to_json(), "oracles": list(opts.oracles)})
    reachable = len(reachable_opcodes())
    tty = sys.stdout.isatty() and not opts.quiet
    t0 = time.perf_counter()
    last_print = 0.0
    if k == 1:
        runner = _Runner(opts, 0, start_examples, quotas[0], deadline)
        if opts.quiet or not tty:
            runner.run()
        else:
            import threading
            th = threading.Thread(target=runner.run, daemon=True)
            th.start()
            while th.is_alive():
                th.join(0.5)
                line = _progress_line(runner.stats, time.perf_counter() - t0, reachable)
                print("\r" + line[:200], end="", flush=True)
            print()
        run_stats = runner.stats
    else:
        ctx = mp.get_context("spawn")
        procs = [ctx.Process(target=_worker_main, args=(opts, i, start_examples + i * 1_000_000,
                                                        quotas[i], deadline), daemon=False)
                 for i in range(k)]
        for p in procs:
            p.start()
        try:
            while any(p.is_alive() for p in procs):
                time.sleep(0.5)
                elapsed = time.perf_counter() - t0
                if opts.quiet:
                    continue
                s = _aggregate(opts.out, Stats())
                line = _progress_line(s, elapsed, reachable)
                if tty:
                    print("\r" + line[:200], end="", flush=True)
                elif elapsed - last_print >= opts.progress_every:
                    last_print = elapsed
                    print(line, flush=True)
        except KeyboardInterrupt:
            for p in procs:
                p.terminate()
            raise
        finally:
            for p in procs:
                p.join()
        if tty:
            print()
        run_stats = _aggregate(opts.out, Stats())
    elapsed = time.perf_counter() - t0
    run_stats.seconds = elapsed
    shutil.rmtree(stats_dir, ignore_errors=True)
    totals = Stats.from_json(previous.to_json())
    totals.merge(run_stats)
    totals.seconds = previous.seconds + elapsed
    _atomic_json(state_path, {"seed": opts.seed,
                              "examples_started": start_examples + run_stats.programs,
                              "totals": totals.to_json(), "oracles": list(opts.oracles)})
    new_findings = sorted(os.path.join(opts.out, n) for n in os.listdir(opts.out)
                          if not n.startswith(".") and n not in existing
                          and os.path.isfile(os.path.join(opts.out, n, "finding.json")))
    all_findings = sorted(os.path.join(opts.out, n) for n in os.listdir(opts.out)
                          if os.path.isfile(os.path.join(opts.out, n, "finding.json")))
    summary = _summary(run_stats, totals, new_findings, all_findings, opts, reachable)
    if opts.json_summary:
        _atomic_json(opts.json_summary, summary)
    if opts.junit:
        _write_junit(opts.junit, summary)
    return summary


def _summary(run: Stats, totals: Stats, new_findings, all_findings, opts, reachable) -> dict:
    sec = max(run.seconds, 1e-9)
    busy = run.oracle_seconds + run.hloref_seconds + run.generator_seconds
    findings = []
    for path in new_findings:
        try:
            with open(os.path.join(path, "finding.json"), encoding="utf-8") as f:
                meta = json.load(f)
        except (OSError, ValueError):
            meta = {}
        findings.append({"path": path, "verdict": meta.get("verdict"),
                         "culprit": meta.get("culprit"), "blamed_pass": meta.get("blamed_pass"),
                         "signature": meta.get("signature")})
    return {
        "programs": run.programs, "instructions": run.instructions, "seconds": run.seconds,
        "programs_per_second": run.programs / sec, "instructions_per_second": run.instructions / sec,
        "oracle_seconds": run.oracle_seconds, "hloref_seconds": run.hloref_seconds,
        "generator_seconds": run.generator_seconds, "reduce_seconds": run.reduce_seconds,
        "oracle_fraction": run.oracle_seconds / busy if busy else 0.0,
        "opcodes_covered": sorted(run.opcodes), "opcode_counts": dict(run.opcodes),
        "opcodes_reachable": reachable,
        "element_types_covered": sorted(run.element_types),
        "outcomes": dict(run.outcomes), "verdicts": dict(run.verdicts),
        "known_differences": dict(run.known), "rejected": dict(run.rejected),
        "duplicates": run.duplicates, "findings": findings, "new_findings": len(new_findings),
        "all_findings": all_findings, "workers": opts.workers, "seed": opts.seed,
        "oracles": list(opts.oracles), "out": opts.out,
        "totals": {"programs": totals.programs, "instructions": totals.instructions,
                   "seconds": totals.seconds},
    }


def _write_junit(path: str, summary: dict) -> None:
    from xml.sax.saxutils import escape, quoteattr
    cases = [f'  <testcase classname="hloref.fuzz" name="campaign" time="{summary["seconds"]:.1f}"/>']
    for f in summary["findings"]:
        name = os.path.basename(f["path"])
        cases.append(f'  <testcase classname="hloref.fuzz.findings" name={quoteattr(name)}>'
                     f'<failure message={quoteattr(str(f.get("verdict")))}>'
                     f'{escape(json.dumps(f, default=str))}</failure></testcase>')
    text = (f'<?xml version="1.0" encoding="utf-8"?>\n<testsuite name="hloref-fuzz" '
            f'tests="{len(cases)}" failures="{len(summary["findings"])}" '
            f'time="{summary["seconds"]:.1f}">\n' + "\n".join(cases) + "\n</testsuite>\n")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def format_summary(summary: dict) -> str:
    s = summary
    lines = [
        f"programs: {s['programs']} in {s['seconds']:.1f} s ({s['programs_per_second']:.2f}/s), "
        f"instructions: {s['instructions']} ({s['instructions_per_second']:.0f}/s)",
        f"time: oracle {s['oracle_seconds']:.1f} s, hloref {s['hloref_seconds']:.1f} s, generator "
        f"{s['generator_seconds']:.1f} s, reduction {s['reduce_seconds']:.1f} s (oracle fraction "
        f"{s['oracle_fraction']:.0%})",
        f"opcodes covered: {len(s['opcodes_covered'])} (of {s['opcodes_reachable']} reachable); "
        f"element types: {len(s['element_types_covered'])}: {' '.join(s['element_types_covered'])}",
        f"outcomes: {s['outcomes']}",
    ]
    if s["known_differences"]:
        lines.append(f"known differences (not reported): {s['known_differences']}")
    if s["rejected"]:
        lines.append("rejected programs: " + "; ".join(f"{v}× {k}" for k, v in
                                                       sorted(s["rejected"].items(),
                                                              key=lambda kv: -kv[1])[:5]))
    lines.append(f"new findings: {s['new_findings']} (duplicates skipped: {s['duplicates']})")
    for f in s["findings"]:
        c = f.get("culprit") or {}
        lines.append(f"  {f['path']}: {f.get('verdict')} {c.get('opcode', '')} "
                     f"pass={f.get('blamed_pass')}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- replay


def replay(paths, *, worker_factory=None, timeout: float = 60.0) -> list[dict]:
    """Re-run stored findings; each result says whether it still reproduces."""
    from .differential import diff
    dirs = []
    for p in paths:
        if os.path.isfile(os.path.join(p, "finding.json")):
            dirs.append(p)
        elif os.path.isdir(p):
            dirs.extend(os.path.join(p, n) for n in sorted(os.listdir(p))
                        if os.path.isfile(os.path.join(p, n, "finding.json")))
    workers: dict = {}
    results = []
    try:
        for d in dirs:
            with open(os.path.join(d, "finding.json"), encoding="utf-8") as f:
                meta = json.load(f)
            oracle = meta.get("oracle", "xla")
            if oracle not in workers:
                if worker_factory is not None:
                    workers[oracle] = worker_factory(oracle)
                else:
                    from .workers import OracleWorker
                    workers[oracle] = OracleWorker(oracle, timeout=timeout)
            strict = None
            try:
                module, values = _load_program(d)
                r = diff(module, values, oracle=oracle, worker=workers[oracle], timeout=timeout,
                         debug_options=meta.get("debug_options") or None)
                verdict = r.verdict
                known = known_difference(r) if verdict == "mismatch" else \
                    (r.known_gap if verdict == "known-gap" else None)
                reproduces = verdict == meta.get("verdict") and not known
                message = r.summary().splitlines()[0]
                if oracle == "xla" and _has_narrow_float(module):
                    # XLA's contract without excess precision: every narrow rounding kept
                    s = diff(module, values, oracle=oracle, worker=workers[oracle],
                             timeout=timeout, localize=False,
                             debug_options={"xla_allow_excess_precision": False})
                    strict = s.verdict
            except Exception as exc:  # noqa: BLE001
                verdict, reproduces, message = "error", False, f"{type(exc).__name__}: {exc}"
                known = None
            results.append({"path": d, "stored_verdict": meta.get("verdict"), "verdict": verdict,
                            "reproduces": reproduces, "known_difference": known,
                            "verdict_without_excess_precision": strict,
                            "classification": _classify(verdict, known, strict),
                            "message": message})
    finally:
        for w in workers.values():
            w.close()
    return results


# --------------------------------------------------------------------------- HypoFuzz / Atheris

_PROPERTY_WORKER: dict = {}


def _property_worker():
    if "xla" not in _PROPERTY_WORKER:
        from .workers import OracleWorker
        _PROPERTY_WORKER["xla"] = OracleWorker("xla", timeout=60)
    return _PROPERTY_WORKER["xla"]


def _make_property():
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from hypothesis import target

    from .strategies import inputs_for, modules

    @settings(deadline=None, suppress_health_check=list(HealthCheck), max_examples=50)
    @given(modules(), st.data())
    def test_hlo_property(module, data):
        """hloref and XLA:CPU agree on generated programs (or XLA crashes: a finding)."""
        args = data.draw(inputs_for(module))
        outcome = check_program(module, args, _property_worker())
        target(outcome.score, label="log2(1 + max ulp error)")
        assert outcome.kind != "finding", outcome.report.summary()

    return test_hlo_property


_PROPERTY: dict = {}


def __getattr__(name: str):
    """``test_hlo_property`` and ``fuzz_one_input(buffer: bytes)`` (the property on one
    input, for HypoFuzz/Atheris), built on first use: building them imports Hypothesis
    and the strategies, which ``hloref run`` should not pay for at start-up."""
    if name not in ("test_hlo_property", "fuzz_one_input"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if not _PROPERTY:
        try:
            prop = _make_property()
            prop.__test__ = False  # run through fuzz_one_input or by hand, not collected
            _PROPERTY.update(test_hlo_property=prop,
                             fuzz_one_input=prop.hypothesis.fuzz_one_input)
        except ImportError:  # pragma: no cover - hypothesis is a test dependency
            _PROPERTY.update(test_hlo_property=None, fuzz_one_input=None)
    return _PROPERTY[name]


# --------------------------------------------------------------------------- CLI


def cmd_fuzz(args) -> int:
    from hloref import cli
    try:
        seconds = parse_duration(args.time) if args.time else None
    except ValueError as exc:
        raise cli.CliError(str(exc)) from None
    if args.examples is not None and args.examples < 0:
        raise cli.CliError("--examples must be >= 0")
    oracles = ("xla", "tf") if args.oracle == "both" else (args.oracle,)
    if args.ops:
        from .strategies import _MAKERS
        ops = [o for part in args.ops for o in part.split(",") if o]
        bad = [o for o in ops if o not in _MAKERS]
        if bad:
            raise cli.CliError(f"--ops: the generator cannot produce {', '.join(bad)}")
    else:
        ops = None
    opts = CampaignOptions(out=args.out, oracles=oracles, seed=args.seed, examples=args.examples,
                           seconds=seconds, workers=args.workers, ops=ops, db=args.db,
                           db_github=args.db_github, max_instructions=args.max_instructions,
                           timeout=args.timeout, blame=not args.no_blame,
                           json_summary=args.json_summary, junit=args.junit,
                           progress_every=args.progress_every)
    summary = run_campaign(opts)
    print(format_summary(summary))
    return cli.EXIT_MISMATCH if summary["new_findings"] else cli.EXIT_OK


def _has_narrow_float(module) -> bool:
    from hloref.shapes import ArrayShape, flatten_shape
    return any(isinstance(sh, ArrayShape) and sh.element_type.is_float and sh.element_type.bits <= 16
               for _, i in module.instructions() for sh in flatten_shape(i.shape))


def _classify(verdict: str, known, strict) -> str:
    """What a replayed finding is now, under the envelope."""
    if known:
        return f"known difference ({known})"
    if verdict in ("mismatch", "crash", "timeout"):
        return "bug under XLA's default options" + (
            "" if strict is None else f" (without excess precision: {strict})")
    if strict in ("mismatch", "crash", "timeout"):
        return ("inside the envelope with excess precision; a bug only with "
                "xla_allow_excess_precision=false")
    return "not a bug: inside the envelope" + (
        "" if strict is None else " with and without excess precision")


def cmd_replay(args) -> int:
    from hloref import cli
    for p in args.dirs:
        if not os.path.isdir(p):
            raise cli.CliError(f"{p}: not a directory")
    results = replay(args.dirs, timeout=args.timeout)
    if not results:
        raise cli.CliError("no findings (directories with finding.json) found")
    for r in results:
        status = ("REPRODUCES" if r["reproduces"] else
                  f"known difference ({r['known_difference']})" if r.get("known_difference")
                  else "fixed/gone")
        print(f"{status:11s} {r['path']}: stored {r['stored_verdict']}, now {r['verdict']}: "
              f"{r['classification']}")
    n = sum(r["reproduces"] for r in results)
    print(f"{n} of {len(results)} findings still reproduce")
    if args.json:
        _atomic_json(args.json, results)
    return cli.EXIT_MISMATCH if n else cli.EXIT_OK


def add_fuzz_commands(sub) -> None:
    f = sub.add_parser("fuzz", help="run a fuzz campaign: generated programs vs an oracle")
    budget = f.add_mutually_exclusive_group()
    budget.add_argument("--time", help="run this long (90s, 10m, 1h)")
    budget.add_argument("--examples", type=int, help="run this many programs (default 100)")
    f.add_argument("--oracle", choices=["xla", "tf", "both"], default="xla")
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--workers", type=int, default=1, help="worker processes (one oracle each)")
    f.add_argument("--ops", nargs="+", help="restrict the generated opcodes (space/comma separated)")
    f.add_argument("--out", default="fuzz-findings", help="findings and campaign state")
    f.add_argument("--db", help="Hypothesis example database directory")
    f.add_argument("--db-github", metavar="OWNER/REPO",
                   help="also read the example database from this repository's "
                        "hloref-fuzz-db artifact (read-only)")
    f.add_argument("--json-summary", help="write the summary as JSON here")
    f.add_argument("--junit", help="write a JUnit XML report here")
    f.add_argument("--max-instructions", type=int, default=12)
    f.add_argument("--timeout", type=float, default=60.0, help="oracle time limit per run (s)")
    f.add_argument("--no-blame", action="store_true", help="skip XLA pass blame on findings")
    f.add_argument("--progress-every", type=float, default=10.0,
                   help="seconds between progress lines when not on a TTY")
    f.set_defaults(fn=cmd_fuzz)

    r = sub.add_parser("replay", help="re-run stored findings; say which still reproduce")
    r.add_argument("dirs", nargs="+", help="finding directories or a campaign --out directory")
    r.add_argument("--timeout", type=float, default=60.0)
    r.add_argument("--json", help="write the results as JSON here")
    r.set_defaults(fn=cmd_replay)
