"""``pytest --hloref``: the plugin run on small JAX test suites in a subprocess.

The suites' own values come from XLA:CPU; what is checked here is that the plugin
sees every executed computation, calls the correct ones matches, fails the test
that executes a real XLA:CPU wrong result (and only with ``--hloref``), writes a
reproducer ``hloref replay`` confirms, and counts repeats, skips and time.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
from pathlib import Path

import pytest

pytest.importorskip("jax")

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
ORDINARY = (ROOT / "tests" / "jax_ordinary_suite.py").read_text()


def _entry_point_installed() -> bool:
    return any(ep.value == "hloref.pytest_plugin"
               for ep in importlib.metadata.entry_points(group="pytest11"))


def run(pytester, *args):
    # the plugin comes in through the pytest11 entry point once hloref is installed; a
    # checkout that was not reinstalled since the entry point was added loads it by name
    extra = [] if _entry_point_installed() else ["-p", "hloref.pytest_plugin"]
    return pytester.runpytest_subprocess(*extra, "-p", "no:cacheprovider", *args, timeout=600)


def summary(result) -> dict:
    text = result.stdout.str()
    m = re.search(r"hloref: (\d+) computations checked: (\d+) matched.*?, (\d+) mismatched; "
                  r"(\d+) skipped as unsupported, (\d+) skipped over --hloref-max-elements=\d+, "
                  r"(\d+) other skips; (\d+) repeated executions on the same inputs not "
                  r"re-evaluated \((\d+) executions seen\)", text)
    assert m, text
    keys = ["checked", "matched", "mismatched", "unsupported", "over_limit", "other", "repeats",
            "executions"]
    out = dict(zip(keys, map(int, m.groups())))
    t = re.search(r"hloref added ([\d.]+) s to a session of ([\d.]+) s", text)
    assert t, text
    out["seconds"] = float(t.group(1))
    return out


def test_registered_through_the_pytest11_entry_point():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '[project.entry-points.pytest11]\nhloref = "hloref.pytest_plugin"' in pyproject


def test_options_and_marker_are_registered(pytester):
    result = run(pytester, "--help")
    out = result.stdout.str()
    for option in ("--hloref", "--hloref-max-elements", "--hloref-out", "--hloref-no-blame",
                   "--hloref-memory"):
        assert option in out
    result = run(pytester, "--markers")
    assert "no_hloref" in result.stdout.str()


def test_known_xla_bug_fails_only_under_hloref_with_a_replayable_reproducer(pytester, tmp_path):
    pytester.makepyfile(test_ordinary=ORDINARY)
    plain = run(pytester)
    plain.assert_outcomes(passed=5)
    assert "hloref" not in plain.stdout.str().split("passed")[-1]

    out_dir = tmp_path / "repro"
    checked = run(pytester, "--hloref", f"--hloref-out={out_dir}")
    checked.assert_outcomes(passed=4, failed=1)
    text = checked.stdout.str()
    assert "FAILED test_ordinary.py::test_int4_residual_is_requantized" in text
    assert "verdict: mismatch (oracle xla): XLA's value is outside the numerical envelope " \
           "around hloref's value" in text  # the vocabulary of hloref diff
    assert "float-normalization-s4" in text  # the blamed pass, as hloref diff --blame gives it
    assert "out[0, 0]" in text  # one output, named by its pytree path and element
    assert re.search(r"hloref: int8\[2, 4\] \[\[ 0, -2,  6, -2\]", text)  # s4 wraps: -8+-8 = 0
    assert re.search(r"XLA: +int8\[2, 4\] \[\[-16, +14,", text)
    s = summary(checked)
    assert s["mismatched"] == 1 and s["checked"] == s["matched"] + 1 and s["checked"] > 10
    # the training loop runs its step 20 times on 20 different weights: each is checked
    assert s["executions"] >= s["checked"] + s["repeats"]

    dirs = [d for d in out_dir.iterdir() if d.is_dir()]
    assert len(dirs) == 1
    d = dirs[0]
    assert str(d) in text
    for name in ("module.hlo", "inputs.npz", "expected.npz", "actual.npz", "report.md",
                 "finding.json"):
        assert (d / name).is_file(), name
    meta = json.loads((d / "finding.json").read_text())
    assert meta["verdict"] == "mismatch" and meta["oracle"] == "xla"
    assert meta["test"] == "test_ordinary.py::test_int4_residual_is_requantized"

    from hloref.fuzz.campaign import replay
    [replayed] = replay([str(d)])
    assert replayed["reproduces"], replayed


SUITE = '''
import jax, jax.numpy as jnp, numpy as np, pytest

def test_loop_same_inputs():
    f = jax.jit(lambda x, y: jnp.tanh(x @ y) + 1)
    x = np.ones((4, 4), np.float32)
    for _ in range(10):
        out = f(x, x)
    np.testing.assert_allclose(out, np.tanh(4.0) + 1, rtol=1e-6)

def test_loop_new_inputs():
    f = jax.jit(lambda x: jnp.sin(x) * 2)
    for i in range(5):
        f(np.full(3, float(i), np.float32))

def test_big():
    jax.jit(lambda x: x.sum())(np.ones(4096, np.float32))

def test_callback():
    x = np.ones(3, np.float32)
    jax.jit(lambda x: jax.pure_callback(np.sin, jax.ShapeDtypeStruct(x.shape, x.dtype), x))(x)

def test_float0():
    g = jax.grad(lambda x, n: x * n, argnums=(0, 1), allow_int=True)(2.0, 3)
    assert g[1].dtype == jax.dtypes.float0

@pytest.mark.no_hloref
def test_excluded():
    f = jax.jit(lambda x: x * 3)
    for i in range(7):
        f(np.full(2, float(i), np.float32))
'''


def test_counts_repeats_distinct_inputs_skips_and_exclusions(pytester):
    pytester.makepyfile(test_suite=SUITE)

    def count(*args):
        result = run(pytester, "--hloref", *args)
        result.assert_outcomes(passed=1, deselected=5)
        return summary(result)

    loop = count("-k", "same_inputs")
    assert loop["repeats"] == 9  # ten calls, one evaluation
    assert loop["mismatched"] == 0 and loop["checked"] == loop["matched"] >= 1

    new = count("-k", "new_inputs")
    assert new["repeats"] == 0 and new["checked"] >= 5  # every distinct input is checked

    big = count("-k", "big", "--hloref-max-elements=1000")
    assert big["over_limit"] >= 1
    assert count("-k", "big")["over_limit"] == 0

    callback = count("-k", "callback")
    assert callback["unsupported"] >= 1 and callback["mismatched"] == 0

    float0 = count("-k", "float0")  # integer tangents: float0 outputs, pred zeros in HLO
    assert float0["mismatched"] == 0 and float0["checked"] >= 1

    excluded = count("-k", "excluded")
    assert excluded["executions"] == 0 and excluded["checked"] == 0
    assert excluded["seconds"] >= 0.0


DEVICES = '''
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

def test_pmap_and_shard_map():
    assert len(jax.devices()) == 4
    x = np.arange(8.0, dtype=np.float32).reshape(4, 2)
    out = jax.pmap(lambda x: jax.lax.psum(x * 2, "i"), axis_name="i")(x)
    np.testing.assert_array_equal(out, np.broadcast_to((x * 2).sum(0), x.shape))
    mesh = Mesh(np.array(jax.devices()), ("i",))
    f = jax.jit(jax.shard_map(lambda v: jax.lax.psum(v, "i") * jax.lax.axis_index("i"),
                              mesh=mesh, in_specs=P("i"), out_specs=P("i")))
    f(np.arange(8, dtype=np.int32))

def test_auto_sharded_jit():
    mesh = Mesh(np.array(jax.devices()), ("i",))
    x = jax.device_put(np.ones((8, 2), np.float32), NamedSharding(mesh, P("i")))
    jax.jit(lambda v: v.sum(0))(x)
'''


def test_multi_device_shard_map_checked_and_auto_sharding_skipped(pytester, monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
    pytester.makepyfile(test_devices=DEVICES)
    result = run(pytester, "--hloref", "-k", "pmap_and_shard_map")
    result.assert_outcomes(passed=1, deselected=1)
    s = summary(result)
    assert s["mismatched"] == 0 and s["unsupported"] == 0 and s["checked"] >= 2
    result = run(pytester, "--hloref", "-k", "auto_sharded")
    result.assert_outcomes(passed=1, deselected=1)
    s = summary(result)
    assert s["unsupported"] >= 1 and s["mismatched"] == 0
    assert "partitioned by XLA" in result.stdout.str()


NOT_PRED = '''
import jax, jax.numpy as jnp, numpy as np

def test_bool_from_random_bytes():
    raw = np.array([96, 1, 0], np.uint8).view(np.bool_)  # 96 is no pred value
    out = jax.jit(lambda b: b.astype(jnp.uint8))(raw)
    assert np.asarray(out)[0] == 96  # XLA passes the byte through; numpy's view agrees
'''


def test_bytes_that_are_not_pred_values_are_skipped(pytester):
    pytester.makepyfile(test_notpred=NOT_PRED)
    result = run(pytester, "--hloref")
    result.assert_outcomes(passed=1)
    s = summary(result)
    assert s["mismatched"] == 0 and s["other"] >= 1
    assert "pred inputs holding bytes other than 0 and 1" in result.stdout.str()


def test_memory_audit_of_an_ordinary_suite(pytester):
    """``--hloref-memory``: every distinct computation of the ordinary suite (an MLP, a
    training loop, a scan, a sort) audited against XLA:CPU's figures and buffer
    assignment, without a false flag."""
    pytester.makepyfile(test_ordinary=ORDINARY)
    result = run(pytester, "--hloref", "--hloref-memory", "-k", "not int4")
    result.assert_outcomes(passed=4, deselected=1)
    m = re.search(r"hloref memory: (\d+) computations audited: (\d+) checked out, (\d+) with "
                  r"findings; (\d+) not audited", result.stdout.str())
    assert m, result.stdout.str()
    audited, ok, findings, skipped = map(int, m.groups())
    assert audited >= 8 and ok == audited and findings == 0 and skipped == 0



def test_the_background_checker_and_inline_checking_agree(pytester):
    """The checker in its own process (the default) and ``--hloref-inline`` (checking in
    the test's process) see the same executions and give the same counts, the known
    XLA:CPU int4 difference failing the same test."""
    pytester.makepyfile(test_ordinary=ORDINARY)
    counts = []
    for extra in ((), ("--hloref-inline",)):
        result = run(pytester, "--hloref", *extra)
        result.assert_outcomes(passed=4, failed=1)
        assert "FAILED test_ordinary.py::test_int4_residual_is_requantized" in \
            result.stdout.str()
        s = summary(result)
        s.pop("seconds")
        counts.append(s)
    assert counts[0] == counts[1] and counts[0]["mismatched"] == 1
    assert re.search(r"the checker used [\d.]+ CPU s", result.stdout.str())
