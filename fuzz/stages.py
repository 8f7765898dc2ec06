"""Stage attribution: which part of XLA's chain made the answer wrong, measured.

For a mismatch, each stage's output is evaluated by hloref on the same inputs and
judged against the envelope of the original module (``check.Reference``); the first
stage whose output is already outside is the one at fault:

1. ``parse``: XLA's parser, printed back;
2. ``import``: HLO→StableHLO and back, unchanged;
3. ``stablehlo``: after StableHLO's canonicalization and folding;
4. ``conversion``: the before_optimizations dump (what XLA's passes start from);
5. ``hlo-pass``: the dump after every pass (``fuzz/blame.py``), confirmed by compiling
   again with the pass disabled;
6. ``emitter`` / ``llvm``: every snapshot is right but XLA's value is not. XLA is
   compiled again in a fresh process with LLVM's ``-opt-bisect-limit`` (through
   ``--xla_backend_extra_options``): still wrong with every optional LLVM pass skipped
   means XLA's emitters; otherwise the limit is bisected to one pass, confirmed by
   ``-opt-disable`` of that pass alone.

For a crash, the module is compiled and run in a fresh process (``oracles/xla_probe``)
that marks each step on stderr, under gdb in batch mode where gdb is installed: the
stage is the step it died in, refined by the dump (which pass ran last) and the native
backtrace (an LLVM frame on top of XLA's emitter is LLVM), with the failed CHECK or
fatal-error line.

The stage table (``fuzz/stage_table.py``) says whose code each stage is.
"""

from __future__ import annotations

import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

from hloref.op_properties import opcodes_with

from .stage_table import component_of, stage
from .workers import FATAL_LINE

__all__ = ["Attribution", "Probe", "probe", "attribute", "attribute_mismatch", "attribute_crash",
           "gdb_available"]

_STAGE_MARK = "HLOREF-STAGE "
_BISECT_LINE = re.compile(r"BISECT: (?:NOT )?running pass \((\d+)\) (\S+) on (.*)$")


def gdb_available() -> bool:
    return shutil.which("gdb") is not None


@dataclass
class Probe:
    """One probe process: its answer (None when it died), how it ended, what it said."""

    answer: dict | None
    returncode: int | None
    signal: str | None
    stage: str | None  # the last step it marked
    stderr: str
    backtrace: list[str] = field(default_factory=list)
    timed_out: bool = False

    @property
    def died(self) -> bool:
        return self.answer is None

    @property
    def fatal(self) -> str | None:
        for line in self.stderr.splitlines():
            if FATAL_LINE.search(line):
                return line.strip()
        return None

    def bisect_passes(self) -> dict[int, str]:
        """``-opt-bisect-limit``'s log: pass number → ``name on function``."""
        out = {}
        for line in self.stderr.splitlines():
            m = _BISECT_LINE.search(line)
            if m:
                out[int(m.group(1))] = f"{m.group(2)} on {m.group(3)}"
        return out


def probe(mode: str, text: str, args=(), *, debug_options: dict | None = None,
          xla_flags: str | None = None, use_gdb: bool = False, one_cpu: bool = False,
          timeout: float = 180.0) -> Probe:
    """Run ``oracles/xla_probe`` (``mode`` ``texts`` or ``run``) in a fresh process."""
    work = tempfile.mkdtemp(prefix="hloref-probe-")
    try:
        job, out = os.path.join(work, "job.pickle"), os.path.join(work, "answer.pickle")
        with open(job, "wb") as f:
            pickle.dump({"mode": mode, "text": text, "args": list(args),
                         "debug_options": debug_options}, f, protocol=pickle.HIGHEST_PROTOCOL)
        cmd = [sys.executable, "-m", "hloref.fuzz.oracles.xla_probe", job, out]
        if use_gdb and gdb_available():
            cmd = ["gdb", "-batch", "-nx", "-ex", "set confirm off",
                   "-ex", "set print thread-events off",
                   "-ex", "handle SIGPIPE SIGUSR1 SIGUSR2 nostop noprint pass",
                   "-ex", "run", "-ex", "bt 40", "--args"] + cmd
        if one_cpu and shutil.which("taskset"):
            cmd = ["taskset", "-c", "0"] + cmd
        env = dict(os.environ)
        env.pop("XLA_FLAGS", None)
        if xla_flags:
            env["XLA_FLAGS"] = xla_flags
        timed_out = False
        try:
            proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, env=env,
                                  timeout=timeout)
            code, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired as exc:
            code, stdout, stderr, timed_out = None, exc.stdout or b"", exc.stderr or b"", True
        text_err = (stderr or b"").decode("utf-8", "replace") + \
            (stdout or b"").decode("utf-8", "replace")
        answer = None
        if os.path.exists(out):
            with open(out, "rb") as f:
                answer = pickle.load(f)
        marks = [line[len(_STAGE_MARK):].strip() for line in text_err.splitlines()
                 if line.startswith(_STAGE_MARK)]
        sig = None
        m = re.search(r"received signal (SIG[A-Z]+)", text_err)
        if m:
            sig = m.group(1)
        elif code is not None and code < 0:
            try:
                sig = signal.Signals(-code).name
            except ValueError:
                sig = f"signal {-code}"
        return Probe(answer, code, sig, marks[-1] if marks else None, text_err,
                     _backtrace(text_err), timed_out)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _backtrace(text: str) -> list[str]:
    """gdb's ``bt`` frames (``#N ...``), function names only; else XLA's own symbolized
    stack (``@ 0x... function``)."""
    frames = []
    for line in text.splitlines():
        m = re.match(r"#(\d+)\s+(?:0x[0-9a-f]+ in )?(.+?)(?: \(.*\))?(?: from (\S+))?(?: at .*)?$",
                     line)
        if m:
            frames.append(f"#{m.group(1)} {_short(m.group(2))}")
    if frames:
        return frames
    return [_short(line.split(None, 2)[2]) for line in text.splitlines()
            if re.match(r"\s+@\s+0x[0-9a-f]+\s+\S", line)]


def _short(frame: str) -> str:
    """A frame's function without its argument list and templates (readable in a report)."""
    frame = frame.strip().replace("(anonymous namespace)", "{anonymous}")
    depth, out = 0, []
    for ch in frame:  # drop template arguments <...>
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif not depth:
            out.append(ch)
    s = "".join(out)
    return s.split("(", 1)[0].strip() if "(" in s else s


@dataclass
class Attribution:
    """Where along the chain the answer went wrong."""

    stage: str | None
    pass_name: str | None = None
    #: True / False when a check confirmed / contradicted the stage; None: not checked
    confirmed: bool | None = None
    confirmation: str = ""
    #: (step, what was seen) in chain order: the evidence table
    steps: list[tuple[str, str]] = field(default_factory=list)
    fatal: str | None = None
    signal: str | None = None
    backtrace: list[str] = field(default_factory=list)
    stablehlo: str | None = None
    #: what the stage did wrong, where a check measured it (a parsed constant's change
    #: of class: ``constant f32: -0 -> +0``); findings' root keys tell causes apart by it
    cause: str | None = None

    @property
    def component(self) -> str:
        return component_of(self.stage, self.pass_name)

    @property
    def repository(self) -> str | None:
        return stage(self.stage).repository if self.stage else None

    def to_json(self) -> dict:
        return {"stage": self.stage, "component": self.component, "repository": self.repository,
                "pass": self.pass_name, "confirmed": self.confirmed,
                "confirmation": self.confirmation, "steps": [list(s) for s in self.steps],
                "fatal": self.fatal, "signal": self.signal, "backtrace": self.backtrace,
                **({"cause": self.cause} if self.cause else {})}

    def table(self) -> str:
        lines = ["| step | what hloref saw |", "|---|---|"]
        lines += [f"| {a} | {b} |" for a, b in self.steps]
        return "\n".join(lines)


def attribute(text: str, args, *, verdict: str, worker=None, debug_options: dict | None = None,
              policy=None, timeout: float = 180.0) -> Attribution:
    """Stage attribution of a finding (``verdict`` mismatch or crash) on XLA:CPU."""
    if verdict == "crash":
        return attribute_crash(text, args, debug_options=debug_options, timeout=timeout)
    return attribute_mismatch(text, args, worker=worker, debug_options=debug_options,
                              policy=policy, timeout=timeout)


# -- mismatches -------------------------------------------------------------------------


def _judge(reference, text: str, args) -> tuple[bool | None, str]:
    """Evaluate ``text`` with hloref against the reference envelope: (inside?, note)."""
    import hloref
    try:
        value = hloref.evaluate(hloref.parse(text), *args)
    except hloref.HloError as exc:
        return None, f"hloref cannot evaluate it: {str(exc).splitlines()[0]}"
    verdict = reference.check(value)
    return verdict.ok, "inside the envelope" if verdict.ok else \
        f"outside: {verdict.describe('the written module', 'this stage')}"


def attribute_mismatch(text: str, args, *, worker=None, debug_options: dict | None = None,
                       policy=None, timeout: float = 180.0) -> Attribution:
    import hloref

    from .blame import first_divergent, read_dump, evaluate_snapshots, pass_of
    from .check import Reference
    from .envelope import EnvelopePolicy

    policy = policy or EnvelopePolicy()
    if debug_options:
        policy = policy.with_debug_options(debug_options)
    reference = Reference(hloref.parse(text), list(args), policy)
    out = Attribution(None)

    # 1: XLA's parser (on the oracle's path: the text is parsed, then imported)
    views = probe("texts", text, timeout=timeout)
    answer = views.answer or {}
    out.stablehlo = answer.get("stablehlo")
    if "parsed" not in answer:
        out.steps.append(("parse", "no output: " + (answer.get("error") or
                                                    f"the probe died ({views.signal})")))
        return out
    inside, note = _judge(reference, answer["parsed"], args)
    out.steps.append(("parse", f"XLA's parsed module printed back: {note}"))
    if inside is False:
        out.stage = "parse"
        _confirm_parse(out, reference.module, answer.get("parsed_proto"))
        return out

    # 4-5: XLA's own dump, pass by pass
    own = worker is None
    if own:
        from .workers import OracleWorker
        worker = OracleWorker("xla", timeout=timeout)
    directory = tempfile.mkdtemp(prefix="hloref-dump-")
    try:
        result = worker.run(text, args, debug_options={**(debug_options or {}),
                                                       "xla_dump_to": directory,
                                                       "xla_dump_hlo_pass_re": ".*",
                                                       "xla_dump_large_constants": True})
        if not result.ok:
            out.steps.append(("compile", f"XLA {result.kind}: {result.message}"))
            return out
        xla_value = result.value
        xla_verdict = reference.check(xla_value)
        out.steps.append(("XLA:CPU's value", "inside the envelope" if xla_verdict.ok
                          else f"outside: {xla_verdict.describe('hloref', 'XLA')}"))
        if xla_verdict.ok:
            out.confirmation = "XLA's value is inside the envelope: nothing to attribute"
            return out
        modules = [m for m in read_dump(directory).values() if m.before]
        if not modules:
            out.steps.append(("conversion", "XLA's dump has no before_optimizations module"))
            return out
        dm = max(modules, key=lambda m: len(m.snapshots))
        inside, note = _judge(reference, open(dm.before, encoding="utf-8").read(), args)
        out.steps.append(("before_optimizations", f"the module XLA's passes start from: {note}"))
        if inside is False:
            _split_import(out, reference, answer, args)
            return out
        _, results = evaluate_snapshots(dm, args, policy=policy, reference=reference)
        unknown = [r for r in results if r.status != "ok"]
        bad = first_divergent(results)
        if bad is not None:
            out.stage, out.pass_name = "hlo-pass", pass_of(bad, dm)
            out.steps.append(("hlo-pass", f"first snapshot outside: {bad.label}"))
            if out.pass_name:
                again = worker.run(text, args, debug_options={
                    **(debug_options or {}), "xla_disable_hlo_passes": out.pass_name})
                if again.ok:
                    out.confirmed = reference.check(again.value).ok
                    out.confirmation = (
                        f"with xla_disable_hlo_passes={out.pass_name} XLA's value is "
                        + ("inside the envelope" if out.confirmed else "still outside"))
                else:
                    out.confirmation = f"with the pass disabled XLA {again.kind}: {again.message}"
            return out
        if unknown or not results:
            why = unknown[0].message.splitlines()[0][:160] if unknown else "no snapshot"
            out.steps.append(("hlo-pass", f"{len(unknown)} of {len(results)} snapshots not "
                              f"evaluated ({why}): undetermined"))
            return out
        out.steps.append(("hlo-pass", f"all {len(results)} snapshots, the optimized module "
                          "included, inside the envelope"))
        optimized = open(dm.after, encoding="utf-8").read() if dm.after else None
        legacy = worker.run(text, args, debug_options={**(debug_options or {}),
                                                       "xla_cpu_use_fusion_emitters": False})
        legacy_inside = reference.check(legacy.value).ok if legacy.ok else None
        out.steps.append(("fusion emitters", "with xla_cpu_use_fusion_emitters=false XLA's value "
                          "is " + ({True: "inside the envelope", False: "still outside"}.get(
                              legacy_inside) or f"not available ({legacy.message[:120]})")))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
        if own:
            worker.close()

    # 6: code generation: XLA's emitters or LLVM's optimizations; or the runtime
    _bisect_llvm(out, text, args, reference, debug_options, timeout)
    if out.stage == "emitter":
        thunks = runtime_only(optimized)
        if thunks:
            out.stage = "runtime"
            out.steps.append(("runtime", "XLA:CPU runs every operation of the optimized module "
                              f"as a runtime thunk ({', '.join(thunks)}): no generated kernel "
                              "computes the value"))
            out.confirmation = (f"the optimized module is right and only runtime thunks "
                                f"({', '.join(thunks)}) run it")
        elif legacy_inside:
            out.confirmation += ("; with xla_cpu_use_fusion_emitters=false it is right: "
                                 "XLA:CPU's fusion emitters")
    return out


def _confirm_parse(out: Attribution, module, proto: bytes | None) -> None:
    """The parsed module printed back is outside: the parser or the printer. The
    module's proto holds the parser's literals before any printing: a constant that
    differs there is the parser's (``parsed_literals``)."""
    from .parsed_literals import constant_differences
    if not proto:
        return
    differences = constant_differences(module, proto)
    if differences:
        out.confirmed = True
        out.cause = "constant " + differences[0].kind
        out.confirmation = ("XLA's parsed module (its HloModuleProto, before printing) "
                            "already holds a different constant: "
                            + "; ".join(d.text for d in differences[:3]))
    else:
        out.confirmation = ("every constant of XLA's parsed HloModuleProto equals the text's "
                            "bit for bit: the value changes elsewhere in parsing, or in "
                            "printing the module back")


def runtime_only(optimized: str | None) -> list[str]:
    """The opcodes of the optimized module's entry when every one of them is run by a
    runtime thunk (``stage_table.RUNTIME_THUNK_OPCODES``), else []."""
    if not optimized:
        return []
    import hloref
    from .stage_table import RUNTIME_THUNK_OPCODES
    try:
        module = hloref.parse(optimized)
    except hloref.HloError:
        return []
    ops = {i.opcode for i in module.entry.instructions} - opcodes_with("plumbing") - {"bitcast"}
    return sorted(ops) if ops and ops <= RUNTIME_THUNK_OPCODES else []


def _split_import(out: Attribution, reference, answer: dict, args) -> None:
    """Between XLA's parser and its passes the module went to StableHLO and back: split
    that span with the probe's views (unchanged round trip, then canonicalized)."""
    for name, key, what in (("import", "roundtrip", "StableHLO converted back unchanged"),
                            ("stablehlo", "canonicalized", "StableHLO canonicalized, converted "
                             "back")):
        if key not in answer:
            out.steps.append((name, "no output: " + (answer.get("error") or "not reached")))
            out.stage = "conversion"
            return
        inside, note = _judge(reference, answer[key], args)
        out.steps.append((name, f"{what}: {note}"))
        if inside is False:
            out.stage = name
            if key == "roundtrip":
                _note_folded(out, answer)
            return
    out.stage = "conversion"


def _note_folded(out: Attribution, answer: dict) -> None:
    """Which of the module's operations the StableHLO still holds and the HLO converted
    back no longer does: folded by the conversion back (MHLO's or StableHLO's folders
    run there), not by the importer."""
    import hloref
    try:
        before = hloref.parse(answer["parsed"])
        after = hloref.parse(answer["roundtrip"])
    except hloref.HloError:
        return
    gone = sorted({i.opcode for _, i in before.instructions()} - opcodes_with("plumbing")
                  - {i.opcode for _, i in after.instructions()})
    stablehlo = answer.get("stablehlo") or ""
    for opcode in gone:
        dialect = re.search(r"\b((?:stablehlo|mhlo|chlo)\.%s)\b" % re.escape(opcode.replace("-", "_")),
                            stablehlo)
        if dialect:
            out.steps.append(("import", f"the imported StableHLO still holds `{dialect.group(1)}`; "
                              f"the HLO converted back has no `{opcode}`: folded in the "
                              "conversion back to HLO"))
            if dialect.group(1).startswith("stablehlo."):
                # ConvertStablehloToHlo runs StableHLO's target-independent optimization
                # (its folders) first; an MHLO op is folded by XLA's MHLO folders instead
                out.stage = "stablehlo"
                out.confirmation = (f"`{dialect.group(1)}` is folded away by the conversion "
                                    "back to HLO, which runs StableHLO's folders "
                                    "(StablehloTargetIndependentOptimizationPass)")


def _llvm_run(text, args, debug_options, extra: str, timeout) -> Probe:
    return probe("run", text, args, debug_options=debug_options,
                 xla_flags=f"--xla_backend_extra_options={extra}", one_cpu=True, timeout=timeout)


def _inside(reference, p: Probe) -> bool | None:
    if p.answer is None or "value" not in p.answer:
        return None
    return reference.check(p.answer["value"]).ok


def _bisect_llvm(out: Attribution, text, args, reference, debug_options, timeout) -> None:
    none = _llvm_run(text, args, debug_options, "-opt-bisect-limit=0", timeout)
    ok = _inside(reference, none)
    if ok is None:
        out.steps.append(("llvm", f"XLA did not run with LLVM's passes skipped: "
                          f"{(none.answer or {}).get('error') or none.signal}"))
        return
    if not ok:
        out.stage = "emitter"
        out.steps.append(("llvm", "still outside with every optional LLVM pass skipped "
                          "(-opt-bisect-limit=0)"))
        out.confirmed = True
        out.confirmation = "XLA's value is wrong before LLVM optimizes anything"
        return
    full = _llvm_run(text, args, debug_options, "-opt-bisect-limit=-1", timeout)
    passes = full.bisect_passes()
    if _inside(reference, full) is not False or not passes:
        out.steps.append(("llvm", "inside with LLVM's passes skipped, but the full run under "
                          "opt-bisect did not reproduce: undetermined"))
        return
    lo, hi = 0, max(passes)  # inside at lo, outside at hi
    last = full
    while hi - lo > 1:
        mid = (lo + hi) // 2
        p = _llvm_run(text, args, debug_options, f"-opt-bisect-limit={mid}", timeout)
        if _inside(reference, p):
            lo = mid
        else:
            hi, last = mid, p
    culprit = last.bisect_passes().get(hi) or passes.get(hi, "?")
    name = culprit.split(" on ", 1)[0]
    out.stage, out.pass_name = "llvm", name
    out.steps.append(("llvm", f"inside with -opt-bisect-limit={lo}, outside with {hi}: "
                      f"pass ({hi}) {culprit}"))
    check = _llvm_run(text, args, debug_options, f"-opt-disable={name}", timeout)
    out.confirmed = _inside(reference, check)
    out.confirmation = (f"with -opt-disable={name} alone XLA's value is "
                        + {True: "inside the envelope", False: "still outside",
                           None: "not available"}[out.confirmed])


# -- crashes ----------------------------------------------------------------------------

#: Frames that place a crash in a component, checked from the top of the stack down.
_FRAME_STAGES = (
    (re.compile(r"\bllvm::(?!IRBuilder|Value|Type|ConstantFolder|Module::)"), "llvm"),
    (re.compile(r"xla::cpu::.*(Emitter|Emit|emitter)|xla::llvm_ir::|ElementalIrEmitter"),
     "emitter"),
    (re.compile(r"xla::cpu::.*(Thunk|Execute)|xla::cpu::.*runtime"), "runtime"),
)
_STABLEHLO_PATTERN = re.compile(r"mlir::stablehlo::(?:\{anonymous\}::)?(\w+)::matchAndRewrite")
_PASS_FRAME = re.compile(r"xla::(?:\w+::)*(\w+)::(?:Run|RunImpl|RunOnModule|RunOnComputation)$")
#: Passes whose registered name is not their class name in kebab case.
_PASS_NAMES = {"AlgebraicSimplifier": "algsimp", "HloConstantFolding": "constant_folding",
               "HloDCE": "dce", "HloCSE": "cse", "TupleSimplifier": "tuple-simplifier",
               "WhileLoopSimplifier": "simplify-while-loops",
               "ConditionalSimplifier": "simplify-conditional", "HloVerifier": "hlo-verifier"}
_NOT_PASSES = ("HloPassPipeline", "HloPassFix", "HloPassInterface", "HloModulePass",
               "CpuCompiler", "Compiler")


def _pass_in_backtrace(frames: list[str]) -> tuple[str, str] | None:
    """The innermost HLO pass on the stack: (class, registered name)."""
    for f in frames:
        m = _PASS_FRAME.search(f.split(" ", 1)[-1])
        if m and not m.group(1).startswith(_NOT_PASSES):
            cls = m.group(1).removesuffix("Visitor")  # a pass's DfsHloVisitor
            name = _PASS_NAMES.get(cls) or re.sub(r"(?<!^)(?=[A-Z])", "-", cls).lower()
            return cls, name
    return None


def attribute_crash(text: str, args, *, debug_options: dict | None = None,
                    timeout: float = 180.0) -> Attribution:
    from .blame import read_dump
    directory = tempfile.mkdtemp(prefix="hloref-dump-")
    try:
        p = probe("run", text, args, debug_options={**(debug_options or {}),
                                                    "xla_dump_to": directory,
                                                    "xla_dump_hlo_pass_re": ".*",
                                                    "xla_dump_large_constants": True},
                  use_gdb=True, timeout=timeout)
        out = Attribution(None, fatal=p.fatal, signal=p.signal, backtrace=p.backtrace)
        if not p.died and not p.timed_out:
            out.steps.append(("probe", "did not crash in a fresh process: "
                              + ("ran" if "value" in (p.answer or {}) else
                                 str((p.answer or {}).get("error")))))
            return out
        step = p.stage or "start"
        out.steps.append(("probe", f"died in step `{step}`" + (f" with {p.signal}" if p.signal
                                                               else "")))
        if step in ("parse", "import"):
            out.stage = step
            return out
        if step == "run":
            out.stage = "runtime"
            return out
        modules = list(read_dump(directory).values())
        dm = max(modules, key=lambda m: len(m.snapshots)) if modules else None
        if dm is None or not dm.before:
            out.stage = "conversion"
            out.steps.append(("dump", "no before_optimizations module: died before XLA's "
                              "passes"))
            pattern = next((m for m in (_STABLEHLO_PATTERN.search(f) for f in p.backtrace[:30])
                            if m), None)
            if pattern:  # a StableHLO rewrite pattern is on the crash's own stack
                out.stage, out.pass_name = "stablehlo", pattern.group(1)
                out.steps.append(("backtrace", f"StableHLO pattern on the stack: {pattern.group(0)}"))
                out.confirmed = True
                out.confirmation = (f"the crash is inside StableHLO's {pattern.group(1)}, which "
                                    "XLA's StableHLO→HLO conversion runs")
                return out
            # the translation alone, step by step: which half dies?
            views = probe("texts", text, use_gdb=True, timeout=timeout)
            if views.died and views.stage in ("import", "export", "stablehlo"):
                folder = any(re.search(r"mlir::stablehlo::.*(Fold|Pattern)", f)
                             for f in views.backtrace[:25])
                out.stage = "stablehlo" if views.stage == "stablehlo" or folder else "import"
                if folder:
                    out.backtrace = views.backtrace
                    out.steps.append(("backtrace", "a StableHLO folding pattern is on the stack: "
                                      + next(f for f in views.backtrace
                                             if re.search(r"mlir::stablehlo::.*(Fold|Pattern)", f))))
                out.steps.append(("translation", f"converting alone, the process dies in "
                                  f"step `{views.stage}`" + (f" with {views.signal}"
                                                             if views.signal else "")))
                out.confirmed = True
                out.confirmation = (f"the {views.stage} step alone (outside the compiler) "
                                    "dies the same way")
            return out
        codegen = dm.after is not None
        frames = " ".join(p.backtrace[:25])
        top = _frame_stage(p.backtrace)
        if codegen or top in ("llvm", "emitter"):
            out.stage = top if top in ("llvm", "emitter") else "emitter"
            out.steps.append(("dump", "the optimized module was written: died in code "
                              "generation" if codegen else "died under a code-generation frame"))
            if out.stage == "llvm":
                m = re.search(r"llvm::(\w+)::", frames)
                out.pass_name = m.group(1) if m else None
            return out
        out.stage = "hlo-pass"
        last = dm.snapshots[-1] if dm.snapshots else None
        after_last = (last.next_pass if last is not None and last.next_pass
                      and last.next_pass != "pipeline-end" else None)
        out.steps.append(("dump", f"last snapshot: {last.label if last else 'before_optimizations'}"
                          + (f"; the next pass that changed a module: {after_last}"
                             if after_last else "")))
        in_stack = _pass_in_backtrace(p.backtrace)
        if in_stack:
            out.steps.append(("backtrace", f"pass on the stack: {in_stack[0]} ({in_stack[1]})"))
        # the stack names the pass that was running; the dump only the last that changed
        out.pass_name = in_stack[1] if in_stack else after_last
        if out.pass_name:
            again = probe("run", text, args, debug_options={
                **(debug_options or {}), "xla_disable_hlo_passes": out.pass_name},
                timeout=timeout)
            out.confirmed = not again.died
            answer = again.answer or {}
            out.confirmation = f"with xla_disable_hlo_passes={out.pass_name} XLA " + (
                "still crashes" if again.died else "compiles and runs" if "value" in answer
                else f"does not crash (it refuses the module: {str(answer.get('error'))[:160]})")
        return out
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _frame_stage(frames: list[str]) -> str | None:
    """The component of the first frame (from the top) that names one, below the
    signal and logging frames."""
    for f in frames:
        for pattern, name in _FRAME_STAGES:
            if pattern.search(f):
                return name
    return None
