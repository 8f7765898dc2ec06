"""Multi-device modules (``replica_count`` × ``num_partitions`` > 1) on XLA:CPU with
several host devices (``fuzz.oracles.xla`` with ``num_replicas``/``num_partitions``)
against hloref's simulated devices, on the same per-device inputs.

The table (tests/collective_modules.py) covers XLA's four collective group modes
(``GetCollectiveOpGroupMode``): no channel_id (replica ids), channel_id on an op without
a ``use_global_device_ids`` field (collective-permute, all-to-all: partition ids),
channel_id with the field false or absent (all-reduce, all-gather: replicas across all
partitions) and true (global device ids). XLA runs in a child
process: the host device count must be set before jax starts. Values are small integers
(in f32 too), so every sum is exact and the comparison is exact.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import hloref

from collective_modules import MODULES, per_device_inputs

_CHILD = textwrap.dedent("""
    import os, sys, pickle
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    from hloref.fuzz.oracles import xla
    jobs = pickle.load(sys.stdin.buffer)
    out = {}
    for name, (text, args) in jobs.items():
        try:
            out[name] = ("ok", xla.compile_hlo(text).run(*args))
        except Exception as exc:
            out[name] = ("error", f"{type(exc).__name__}: {exc}")
    pickle.dump(out, sys.stdout.buffer)
""")


@pytest.fixture(scope="module")
def xla_results():
    pytest.importorskip("jax")
    import pickle
    jobs = {name: (text, per_device_inputs(hloref.parse(text))) for name, text in MODULES.items()}
    proc = subprocess.run([sys.executable, "-c", _CHILD], input=pickle.dumps(jobs),
                          capture_output=True, timeout=300,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    return jobs, pickle.loads(proc.stdout)


def _leaves(v):
    if isinstance(v, (tuple, list)):
        for x in v:
            yield from _leaves(x)
    else:
        yield np.asarray(v)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_multi_device_module_matches_xla(xla_results, name):
    jobs, results = xla_results
    status, expected = results[name]
    assert status == "ok", expected
    text, args = jobs[name]
    ours = hloref.evaluate(text, *args)
    assert len(ours) == len(expected)
    for d, (mine, theirs) in enumerate(zip(ours, expected)):
        for a, b in zip(_leaves(mine), _leaves(theirs), strict=True):
            np.testing.assert_array_equal(a, b, err_msg=f"{name}: device {d}")


def test_collective_permute_pair_outside_the_partitions():
    text = MODULES["collective_permute_modes"].replace("{{1,0}}", "{{2,0}}")
    args = per_device_inputs(hloref.parse(text))
    with pytest.raises(hloref.HloError, match="source 2 of source_target_pairs is out of range"):
        hloref.evaluate(text, *args)  # the verifier refuses it
    with pytest.raises(hloref.HloEvalError, match="partition 2, but the module runs on 2"):
        hloref.evaluate(text, *args, verify=False)


def test_oracle_reads_device_counts():
    from hloref.fuzz.oracles.xla import device_counts
    assert device_counts(MODULES["all_reduce_modes"]) == (2, 2)
    assert device_counts(MODULES["partitions_only"]) == (1, 4)
    assert device_counts("HloModule m\nENTRY e { ROOT p = f32[] parameter(0) }") == (1, 1)


def test_all_gather_whose_group_contradicts_its_declared_shape_is_an_error():
    # collective_ops_e2e_test.cc:2822 in miniature: num_partitions=2, but an all-gather
    # without channel_id gathers over replicas, and there is one: one participant cannot
    # double dimension 1. XLA:CPU returns garbage (NaN on some inputs); hloref refuses.
    text = """HloModule m, num_partitions=2
ENTRY e {
  x = bf16[1,2,16] parameter(0)
  ROOT ag = bf16[1,4,16] all-gather(x), dimensions={1}, replica_groups={}
}
"""
    xs = [np.ones((1, 2, 16), np.float32).astype(hloref.types.element_type("bf16").dtype)] * 2
    with pytest.raises(hloref.HloError, match=r"1 participant\(s\) give \[1, 2, 16\], but the "
                                              r"declared result is \[1, 4, 16\]"):
        hloref.evaluate(text, xs, verify=False)
