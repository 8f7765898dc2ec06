"""Multi-device modules (``replica_count`` × ``num_partitions`` > 1) on XLA:CPU with
several host devices (``fuzz.oracles.xla`` with ``num_replicas``/``num_partitions``)
against hloref's simulated devices, on the same per-device inputs.

The table covers XLA's four collective group modes (operation_semantics; ``GetCollective
OpGroupMode``): no channel_id (replica ids), channel_id (partition ids for
collective-permute and all-reduce), channel_id with ``use_global_device_ids=false``
(replicas across partitions) and ``=true`` (global device ids). XLA runs in a child
process: the host device count must be set before jax starts. Values are small integers
(in f32 too), so every sum is exact and the comparison is exact.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import hloref

ADD = "add {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n  ROOT s = s32[] add(a, b)\n}\n"
ADDF = "addf {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"

MODULES = {
    # 2 replicas x 2 partitions: every group mode of all-reduce, ids of each device
    "all_reduce_modes": "HloModule m, replica_count=2, num_partitions=2\n" + ADD + """
ENTRY e {
  x = s32[3] parameter(0)
  cross_replica = s32[3] all-reduce(x), replica_groups={{0,1}}, to_apply=add
  cross_partition = s32[3] all-reduce(x), channel_id=1, replica_groups={{0,1}}, to_apply=add
  replicas_all_partitions = s32[3] all-reduce(x), channel_id=2, replica_groups={{0,1}},
      use_global_device_ids=false, to_apply=add
  flattened = s32[3] all-reduce(x), channel_id=3, replica_groups={{0,3},{1,2}},
      use_global_device_ids=true, to_apply=add
  r = u32[] replica-id()
  p = u32[] partition-id()
  ROOT t = (s32[3], s32[3], s32[3], s32[3], u32[], u32[]) tuple(cross_replica,
      cross_partition, replicas_all_partitions, flattened, r, p)
}
""",
    # collective-permute: replica ids without channel_id, partition ids with it
    "collective_permute_modes": "HloModule m, replica_count=2, num_partitions=2\n" + """
ENTRY e {
  x = f32[2,2] parameter(0)
  across_replicas = f32[2,2] collective-permute(x), source_target_pairs={{0,1},{1,0}}
  across_partitions = f32[2,2] collective-permute(x), channel_id=1, source_target_pairs={{1,0}}
  ROOT t = (f32[2,2], f32[2,2]) tuple(across_replicas, across_partitions)
}
""",
    "gather_scatter_to_all": "HloModule m, replica_count=4\n" + ADDF + """
ENTRY e {
  x = f32[4,2] parameter(0)
  ag = f32[8,2] all-gather(x), replica_groups={{0,3},{1,2}}, dimensions={0}
  rs = f32[2,2] reduce-scatter(x), replica_groups={{2,1},{3,0}}, dimensions={0}, to_apply=addf
  a2a = f32[4,2] all-to-all(x), replica_groups={{0,1,2,3}}, dimensions={0}
  cp = f32[4,2] collective-permute(x), source_target_pairs={{0,1},{1,2},{2,3}}
  ROOT t = (f32[8,2], f32[2,2], f32[4,2], f32[4,2]) tuple(ag, rs, a2a, cp)
}
""",
    "partitions_only": "HloModule m, num_partitions=4\n" + ADDF + """
ENTRY e {
  x = f32[4] parameter(0)
  ar = f32[4] all-reduce(x), channel_id=1, replica_groups={{0,1},{2,3}},
      use_global_device_ids=true, to_apply=addf
  ag = f32[8] all-gather(x), channel_id=2, replica_groups={{1,3}, {0,2}}, dimensions={0},
      use_global_device_ids=true
  cp = f32[4] collective-permute(x), channel_id=3, source_target_pairs={{3,0},{0,3}}
  ROOT t = (f32[4], f32[8], f32[4]) tuple(ar, ag, cp)
}
""",
}


def _inputs(module):
    n = module.replica_count * module.num_partitions
    rng = np.random.default_rng(7)
    out = []
    for p in module.entry.parameters:
        dtype = p.shape.element_type.dtype
        out.append([rng.integers(-50, 50, size=p.shape.dims).astype(dtype) for _ in range(n)])
    return out


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
    jobs = {name: (text, _inputs(hloref.parse(text))) for name, text in MODULES.items()}
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
    with pytest.raises(hloref.HloEvalError, match="partition 2, but the module runs on 2"):
        hloref.evaluate(text, *_inputs(hloref.parse(text)))


def test_oracle_reads_device_counts():
    from hloref.fuzz.oracles.xla import device_counts
    assert device_counts(MODULES["all_reduce_modes"]) == (2, 2)
    assert device_counts(MODULES["partitions_only"]) == (1, 4)
    assert device_counts("HloModule m\nENTRY e { ROOT p = f32[] parameter(0) }") == (1, 1)
