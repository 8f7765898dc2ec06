"""Fuzz campaigns end to end: a tiny real campaign against XLA, a planted finding
(a fake oracle that perturbs or crashes) reduced, deduplicated, written atomically
and replayed, and a killed campaign that resumes without losing a finding."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import hloref
from hloref.cli import main

pytest.importorskip("jax")

from hloref.fuzz import campaign as C  # noqa: E402
from hloref.fuzz.workers import OracleResult, OracleWorker  # noqa: E402

PLANT = "HloModule m\n\nENTRY e {\n  a = f32[4] parameter(0)\n  b = f32[4] parameter(1)\n" \
        "  c = f32[4] add(a, b)\n  d = f32[4] multiply(c, b)\n  e = f32[4] exponential(a)\n" \
        "  ROOT t = (f32[4], f32[4]) tuple(d, e)\n}\n"


class PlantedWorker:
    """The real XLA oracle, except that any module with a ``multiply`` comes back off
    by one (``mode="perturb"``) or kills the oracle (``mode="crash"``)."""

    def __init__(self, mode: str, inner: OracleWorker):
        self.mode = mode
        self.inner = inner
        self.seconds = 0.0
        self.oracle = "xla"

    def run(self, text, args, **kw):
        if " multiply(" in text and self.mode == "crash":
            return OracleResult("crash", message="planted crash", signal="SIGABRT")
        r = self.inner.run(text, args, **kw)
        self.seconds = self.inner.seconds
        if r.ok and " multiply(" in text and self.mode == "perturb":
            r.value = _perturb(r.value)
        return r

    def close(self):
        pass


def _perturb(value):
    if isinstance(value, tuple):
        return tuple(_perturb(v) for v in value)
    return (value.astype(np.float64) + 1).astype(value.dtype) if value.dtype.kind == "f" else value


@pytest.fixture(scope="module")
def xla():
    w = OracleWorker("xla", timeout=120)
    yield w
    w.close()


def _findings(out):
    return sorted(n for n in os.listdir(out) if os.path.isfile(os.path.join(out, n, "finding.json")))


def test_tiny_campaign_end_to_end(tmp_path, capsys):
    out, summary = tmp_path / "out", tmp_path / "summary.json"
    junit = tmp_path / "junit.xml"
    code = main(["fuzz", "--examples", "5", "--seed", "0", "--out", str(out), "--json-summary",
                 str(summary), "--junit", str(junit), "--no-blame"])
    data = json.loads(summary.read_text())
    assert code == (1 if data["new_findings"] else 0)
    for key in ("programs", "instructions", "seconds", "opcodes_covered", "element_types_covered",
                "findings", "oracle_seconds"):
        assert key in data
    assert data["programs"] == 5 and data["instructions"] >= 5
    assert data["opcodes_covered"] and data["element_types_covered"]
    assert data["oracle_seconds"] > 0
    assert "programs: 5" in capsys.readouterr().out
    assert junit.read_text().startswith("<?xml")


def test_planted_mismatch_is_reduced_deduplicated_and_replayed(tmp_path, xla):
    out = str(tmp_path / "out")
    opts = C.CampaignOptions(out=out, worker_factory=lambda o: PlantedWorker("perturb", xla),
                             blame=False)
    runner = C.Runner(opts, 0, 0, None, None)
    module = hloref.parse(PLANT)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(4).astype(np.float32) for _ in range(2)]
    first = runner.handle(module, args, "xla", {"seed": 1})
    assert first.kind == "finding" and first.report.culprit.innermost().opcode == "multiply"
    runner.handle(module, args, "xla", {"seed": 2})  # the same failure again: a duplicate
    assert runner.stats.duplicates == 1
    # a mismatch waits, unreduced, until the testing is over
    assert not _findings(out) and len(os.listdir(os.path.join(out, "pending"))) == 1
    runner.reduce_deferred()
    assert runner.stats.reduce_seconds > 0 and len(runner.stats.findings) == 1
    found = _findings(out)
    assert len(found) == 1 and found[0].startswith("mismatch-multiply-")
    d = os.path.join(out, found[0])
    assert sorted(os.listdir(d)) == ["actual.npz", "expected.npz", "finding.json", "inputs.npz",
                                     "module.hlo", "report.md"]
    meta = json.load(open(os.path.join(d, "finding.json")))
    assert meta["signature"]["opcodes"] == ["multiply"] and meta["verdict"] == "mismatch"
    assert meta["seed"] == {"seed": 1}
    reduced = hloref.parse(open(os.path.join(d, "module.hlo")).read())
    assert {i.opcode for i in reduced.entry.instructions} <= {"parameter", "multiply"}
    assert not [n for n in os.listdir(out) if n.startswith(".finding-")]  # nothing half-written
    assert not os.listdir(os.path.join(out, "pending"))
    # replay: the planted oracle still disagrees, the real one agrees (the "bug" is fixed)
    again = C.replay([out], worker_factory=lambda o: PlantedWorker("perturb", xla))
    assert [r["reproduces"] for r in again] == [True]
    fixed = C.replay([d], worker_factory=lambda o: PlantedWorker("none", xla))
    assert [r["reproduces"] for r in fixed] == [False]


def test_planted_crash_is_a_finding(tmp_path, xla):
    out = str(tmp_path / "out")
    opts = C.CampaignOptions(out=out, worker_factory=lambda o: PlantedWorker("crash", xla))
    runner = C.Runner(opts, 0, 0, None, None)
    module = hloref.parse(PLANT)
    args = [np.ones(4, np.float32), np.ones(4, np.float32)]
    outcome = runner.handle(module, args, "xla", None)
    assert outcome.kind == "finding" and outcome.verdict == "crash"
    found = _findings(out)
    assert len(found) == 1 and found[0].startswith("crash-")
    reduced = open(os.path.join(out, found[0], "module.hlo")).read()
    assert "multiply(" in reduced and "exponential(" not in reduced
    # programs like the reduced crash run alone from now on, not in a batch
    assert runner.refusals["xla"].refused(module)
    assert not runner.refusals["xla"].refused(hloref.parse(PLANT.replace("multiply", "add")))


def test_known_differences_are_not_findings(tmp_path, xla):
    text = ("HloModule m\n\nENTRY e {\n  a = s32[2] parameter(0)\n  b = s32[2] parameter(1)\n"
            "  ROOT c = s32[2] power(a, b)\n}\n")
    module = hloref.parse(text)
    # 3**65 wraps around in s32; XLA:CPU's integer power reads the exponent's low 6 bits (3**1)
    args = [np.array([3, 2], np.int32), np.array([65, 2], np.int32)]
    outcome = C.check_program(module, args, xla)
    assert outcome.kind == "known" and outcome.known == "int-power"


def test_killed_campaign_resumes_without_losing_findings(tmp_path, xla):
    out = str(tmp_path / "out")
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    proc = subprocess.Popen([sys.executable, "-m", "hloref", "fuzz", "--time", "5m", "--out", out,
                             "--seed", "3", "--no-blame"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.time() + 90
        stats = os.path.join(out, ".stats", "worker-0.json")
        while time.time() < deadline:
            if os.path.exists(stats) and json.load(open(stats))["done"] >= 2:
                break
            time.sleep(0.5)
        else:
            pytest.fail("the campaign made no progress")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    # a finding the killed run had recorded but not reduced yet
    module = hloref.parse(PLANT)
    args = [np.full(4, 2, np.float32), np.full(4, 3, np.float32)]
    C.write_pending(out, "planted", module, args, {"oracle": "xla", "verdict": "mismatch",
                                                    "seed": 7, "key": "planted"})
    opts = C.CampaignOptions(out=out, examples=1, seed=3, blame=False, quiet=True,
                             worker_factory=lambda o: PlantedWorker("perturb", xla))
    summary = C.run_campaign(opts)
    assert summary["totals"]["programs"] >= 3  # the killed run's programs are kept
    assert any(n.startswith("mismatch-multiply-") for n in _findings(out))
    assert not [n for n in os.listdir(os.path.join(out, "pending")) if not n.startswith(".")]
    state = json.load(open(os.path.join(out, "campaign.json")))
    assert state["examples_started"] >= 3


def test_internal_error_keeps_the_program(tmp_path, xla, monkeypatch):
    def broken(*a, **k):
        raise KeyError((0,))  # the shape of a real campaign bug (fixed in compare.py)

    from hloref.fuzz import batch
    monkeypatch.setattr(batch, "check_program", broken)
    out = str(tmp_path / "out")
    runner = C.Runner(C.CampaignOptions(out=out, worker_factory=lambda o: xla), 0, 0, None, None)
    module = hloref.parse(PLANT)
    args = [np.ones(4, np.float32), np.full(4, 2, np.float32)]
    outcome = runner.handle(module, args, "xla", None)
    assert outcome.kind == "rejected" and runner.stats.outcomes["internal-error"] == 1
    (key,) = os.listdir(os.path.join(out, "internal-errors"))
    d = os.path.join(out, "internal-errors", key)
    assert sorted(os.listdir(d)) == ["inputs.npz", "module.hlo", "traceback.txt"]
    assert "KeyError: (0,)" in open(os.path.join(d, "traceback.txt")).read()
    again, again_args = C.load_program(d)
    assert again.to_text() == module.to_text()
    np.testing.assert_array_equal(again_args[1], args[1])


def test_fuzz_one_input_is_built_lazily_and_runs():
    import importlib
    campaign = importlib.import_module("hloref.fuzz.campaign")
    fuzz_one_input = campaign.fuzz_one_input  # built on first access
    assert callable(fuzz_one_input) and campaign.test_hlo_property.__test__ is False
    fuzz_one_input(bytes(256))  # the all-zero buffer draws the simplest program; it agrees


def test_a_program_drawn_again_is_not_run_again(tmp_path):
    runner = C.Runner(C.CampaignOptions(out=str(tmp_path)), 0, 0, None, None)
    module = hloref.parse(PLANT)
    args = [np.ones(4, np.float32), np.full(4, 2, np.float32)]
    assert runner.first_time(module, args)
    assert not runner.first_time(hloref.parse(PLANT), [a.copy() for a in args])
    assert runner.first_time(module, [args[0], np.full(4, 3, np.float32)])  # other inputs
    assert runner.stats.repeats == 1


def test_forked_oracle_restarts_after_a_crash_and_a_hang():
    """The XLA oracle's children are forked from a zygote: a crash is still a crash
    verdict with the signal and stderr, a hang a timeout, and the next job runs in a
    new child (counted in ``starts``)."""
    w = OracleWorker("xla", timeout=60, fork=True)
    try:
        text = "HloModule m\nENTRY e { p = f32[2] parameter(0)\n ROOT n = f32[2] negate(p) }"
        assert w.run(text, [np.ones(2, np.float32)]).value.tolist() == [-1, -1]
        if sys.platform.startswith("linux"):
            assert type(w._proc).__name__ == "_Forked"
        crash = w.abort_for_test()
        assert crash.kind == "crash" and crash.signal == "SIGABRT"
        assert "worker told to abort" in crash.stderr_tail
        assert w.hang_for_test(30, timeout=0.5).kind == "timeout"
        assert w.run(text, [np.ones(2, np.float32)]).value.tolist() == [-1, -1]
        assert w.starts == 3
    finally:
        w.close()


def test_xla_opt_fast_reaches_every_compile_and_findings_record_it(tmp_path, monkeypatch):
    opts = C.CampaignOptions(out=str(tmp_path), xla_opt="fast")
    runner = C.Runner(opts, 0, 0, None, None)
    worker = runner.worker("xla")
    try:
        assert worker.debug_options == {"xla_backend_optimization_level": 0}
        jobs = []
        monkeypatch.setattr(worker, "_submit", lambda job, timeout: jobs.append(job))
        worker.run("HloModule m", [], debug_options={"xla_disable_hlo_passes": "x"})
        assert jobs[0][1][2] == {"xla_backend_optimization_level": 0,
                                 "xla_disable_hlo_passes": "x"}
    finally:
        runner.close()
    finding = tmp_path / "mismatch-x"
    finding.mkdir()
    (finding / "finding.json").write_text(json.dumps({"verdict": "mismatch", "debug_options": {}}))
    runner._note_debug_options(str(finding), "xla")
    meta = json.loads((finding / "finding.json").read_text())
    assert meta["debug_options"] == {"xla_backend_optimization_level": 0}
    assert meta["xla_opt"] == "fast"
    assert C.xla_debug_options(C.CampaignOptions(), "xla") == {}
    with pytest.raises(C.CampaignSetupError):
        C.xla_debug_options(C.CampaignOptions(xla_opt="O9"), "xla")


def test_refusals_are_shared_by_the_workers_of_a_campaign(tmp_path):
    opts = C.CampaignOptions(out=str(tmp_path))
    a, b = C.Runner(opts, 0, 0, None, None), C.Runner(opts, 1, 0, None, None)
    a.refusals["xla"].opcodes.add("cosh")
    a.refusals["xla"].pairs.add(("dot", "s2"))
    a.share_refusals()
    b.share_refusals(force=True)
    assert b.refusals["xla"].opcodes == {"cosh"} and b.refusals["xla"].pairs == {("dot", "s2")}
    cosh = hloref.parse("HloModule c\nENTRY e { a = f64[2] parameter(0)\n"
                        " ROOT c = f64[2] cosh(a) }")
    assert b.refusals["xla"].refused(cosh)


def test_mismatches_are_reduced_after_the_testing_and_the_rate_is_the_testings(tmp_path, xla):
    """A campaign whose oracle disagrees on every ``multiply``: the mismatches wait until
    the testing is over, then come out reduced; the summary's rate is over the testing,
    and the reduction's time is said apart from it."""
    out = str(tmp_path / "out")
    opts = C.CampaignOptions(out=out, examples=24, seed=5, blame=False, quiet=True,
                             ops=["multiply", "add"], batch=4,
                             worker_factory=lambda o: PlantedWorker("perturb", xla))
    summary = C.run_campaign(opts)
    assert summary["new_findings"] >= 1
    assert _findings(out) and all(n.startswith("mismatch-") for n in _findings(out))
    assert not [n for n in os.listdir(os.path.join(out, "pending")) if not n.startswith(".")]
    after = summary["reduction_after_testing_seconds"]
    # one worker: its reductions all ran after its testing
    assert summary["reduce_seconds"] > 0 and after >= 0.9 * summary["reduce_seconds"]
    assert summary["wall_seconds"] == pytest.approx(summary["seconds"] + after)
    assert summary["programs_per_second"] == pytest.approx(
        summary["programs"] / summary["seconds"])
