"""``hloref fuzz --ray``: a campaign on a local Ray head (2 CPUs) whose worker process is
killed in the middle finishes, loses no finding, duplicates none and counts every
program once. The oracle is XLA:CPU with a planted bug: f16/f32/f64 results of a
module with a ``multiply`` come back off by one, so the campaign has findings to lose."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("jax")

from hloref.fuzz.campaign import CampaignOptions  # noqa: E402
from hloref.fuzz.ray_campaign import run_ray_campaign  # noqa: E402
from hloref.fuzz.workers import OracleWorker  # noqa: E402

import memory_plant  # noqa: E402


class PlantedOracle:
    """``worker_factory``: XLA:CPU, except that f16/f32/f64 results of a module with
    a ``multiply`` are off by one. Sent to the Ray actors by value."""

    def __call__(self, oracle):
        return _Planted(OracleWorker(oracle, timeout=120))


class _Planted:
    def __init__(self, inner):
        self.inner = inner
        self.oracle = inner.oracle

    @property
    def seconds(self):
        return self.inner.seconds

    def run(self, text, args, **kw):
        r = self.inner.run(text, args, **kw)
        if r.ok and " multiply(" in text:
            r.value = _perturb(r.value)
        return r

    def close(self):
        self.inner.close()


def _perturb(v):
    if isinstance(v, tuple):
        return tuple(_perturb(x) for x in v)
    return (v.astype(np.float64) + 1).astype(v.dtype) if v.dtype.kind == "f" else v


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ray_head():
    temp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # short: Ray's socket paths
    port = _free_port()
    ray_bin = os.path.join(os.path.dirname(sys.executable), "ray")
    head = subprocess.Popen(
        [ray_bin, "start", "--head", "--block", "--num-cpus", "2", "--port", str(port),
         "--include-dashboard=false", "--object-store-memory", str(100 * 2 ** 20),
         "--disable-usage-stats", "--temp-dir", temp],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            probe = subprocess.run([ray_bin, "status", "--address", address],
                                   capture_output=True, text=True)
            if probe.returncode == 0 and "CPU" in probe.stdout:
                break
            if time.time() > deadline or head.poll() is not None:
                pytest.fail(f"the Ray head did not start: {probe.stderr[-2000:]}")
            time.sleep(1)
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
        ray.cloudpickle.register_pickle_by_value(memory_plant)
        yield address
    finally:
        ray.shutdown()
        head.send_signal(signal.SIGTERM)  # `ray start --block` stops what it started
        try:
            head.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        shutil.rmtree(temp, ignore_errors=True)


def _kill_a_busy_worker(out: str, killed: dict, stop: threading.Event) -> None:
    """Once a unit is done, SIGKILL the actor process running another unit."""
    state_path = os.path.join(out, "campaign.json")
    workers_path = os.path.join(out, ".ray", "workers.json")
    while not stop.is_set():
        time.sleep(0.2)
        try:
            done = set(json.load(open(state_path)).get("units_done", []))
            workers = json.load(open(workers_path))
        except (OSError, ValueError):
            continue
        if not done:
            continue
        for w in workers.values():
            if w.get("pid") and w.get("unit") is not None and w["unit"] not in done:
                os.kill(w["pid"], signal.SIGKILL)
                killed.update(w)
                return


def test_ray_campaign_with_a_killed_worker(ray_head, tmp_path):
    out = str(tmp_path / "out")
    opts = CampaignOptions(out=out, examples=48, seed=5, ray=ray_head, workers=2, unit_programs=8,
                           batch=1, blame=False, quiet=True, ops=["multiply", "negate"],
                           worker_factory=PlantedOracle(), json_summary=str(tmp_path / "s.json"),
                           db=str(tmp_path / "db"),
                           junit=str(tmp_path / "junit.xml"))
    killed: dict = {}
    stop = threading.Event()
    killer = threading.Thread(target=_kill_a_busy_worker, args=(out, killed, stop), daemon=True)
    killer.start()
    try:
        summary = run_ray_campaign(opts)
    finally:
        stop.set()
        killer.join()
    assert killed, "no worker was killed while running a unit"
    # the campaign finished, every program counted once
    assert summary["programs"] == 48, (summary["programs"], summary["batching"], summary["ray"])
    assert summary["ray"]["retried_units"] >= 1 and summary["ray"]["lost_units"] == 0
    state = json.load(open(os.path.join(out, "campaign.json")))
    assert state["units_done"] == list(range(6)) and state["totals"]["programs"] == 48
    assert json.load(open(tmp_path / "s.json"))["programs"] == 48
    assert (tmp_path / "junit.xml").read_text().startswith("<?xml")
    # findings: each failure a unit met resolves to one finding directory, none twice
    names = sorted(n for n in os.listdir(out) if os.path.isfile(os.path.join(out, n, "finding.json")))
    metas = [json.load(open(os.path.join(out, n, "finding.json"))) for n in names]
    assert names and all(m["verdict"] == "mismatch" for m in metas)  # the planted bug
    assert len({m["signature_key"] for m in metas}) == len(names)
    assert len({m["campaign_key"] for m in metas}) == len(names)
    keys = {k for ks in state["unit_findings"].values() for k in ks}
    assert keys, "the planted bug was never met"
    for key in keys:
        name = open(os.path.join(out, ".seen", key)).read()
        assert name in names, (key, name)
    assert summary["new_findings"] == len(names)
    assert not [n for n in os.listdir(out) if n.startswith(".finding-")]
    # the actors read and wrote the one example database (a directory every node sees)
    assert any(files for _, _, files in os.walk(tmp_path / "db"))


def test_ray_campaign_with_the_memory_audit(ray_head, tmp_path):
    """``--memory-audit`` on Ray: the planted memory bug of tests/test_memory_campaign.py
    (XLA:CPU's real assignment, each output moved onto parameter 0's read-only bytes) is
    found by the actors, reduced there and written once by the driver, in the local
    campaign's form; the units' audit counts add up."""
    out = str(tmp_path / "out")
    opts = CampaignOptions(out=out, examples=4, seed=5, ray=ray_head, workers=1,
                           unit_programs=2, batch=1, ops=["add"], max_instructions=5,
                           blame=False, quiet=True, memory_audit_every=1,
                           memory_corrupt=memory_plant.plant_output_over_parameter)
    summary = run_ray_campaign(opts)
    m = summary["memory_audit"]
    assert summary["programs"] == 4 and m.get("audited", 0) + m.get("skipped", 0) == 4, m
    assert m.get("failed", 0) >= 1, m
    (name,) = memory_plant.memory_findings(out)
    meta = json.load(open(os.path.join(out, name, "finding.json")))
    assert meta["verdict"] == "memory" and meta["memory"]["planted"]
    assert (meta["memory"]["kind"], meta["memory"]["rule"]) == ("collision", "read-only")
    assert meta["instructions"] <= 3
    assert os.path.isfile(os.path.join(out, name, "buffer-assignment.txt"))
    assert m.get("findings") == 1 and summary["new_findings"] == 1
    keys = {k for ks in json.load(open(os.path.join(out, "campaign.json")))[
        "unit_findings"].values() for k in ks}
    assert {k for k in keys if k.startswith("memory-")}
    for key in keys:
        assert open(os.path.join(out, ".seen", key)).read() in ("", name)


def test_ray_address_nobody_answers_is_a_clear_error(tmp_path, capsys):
    from hloref.cli import main
    port = _free_port()  # nothing listens there
    code = main(["fuzz", "--ray", f"127.0.0.1:{port}", "--examples", "1", "--out",
                 str(tmp_path / "out")])
    assert code == 2
    assert f"--ray 127.0.0.1:{port}: no Ray cluster answers there" in capsys.readouterr().err
