"""Multi-device modules (replicas x partitions) covering XLA's four collective group
modes, shared by the XLA:CPU test (tests/test_collectives_xla.py) and the GPU backend's
(tests/gpu/test_gpu_collectives.py); and the map body holding every one-element
collective form that the GPU backend's computation tests run
(tests/gpu/test_gpu_computation_collectives.py, ..._divergent_collectives.py), with its
values by hand."""

from __future__ import annotations

import numpy as np

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
    # collectives of one channel in different branches of a conditional pair up (XLA:CPU's
    # rendezvous is keyed by the channel; conditional_code_motion_test.cc:632)
    "conditional_same_channel": "HloModule m, replica_count=2\n" + ADDF + """
on_true {
  t = (f32[3]) parameter(0)
  x = f32[3] get-tuple-element(t), index=0
  ar = f32[3] all-reduce(x), channel_id=7, replica_groups={{0,1}}, use_global_device_ids=true,
      to_apply=addf
  ROOT r = (f32[3]) tuple(ar)
}
on_false {
  t = (f32[3]) parameter(0)
  x = f32[3] get-tuple-element(t), index=0
  two = f32[3] constant({2, 2, 2})
  y = f32[3] multiply(x, two)
  ar = f32[3] all-reduce(y), channel_id=7, replica_groups={{0,1}}, use_global_device_ids=true,
      to_apply=addf
  ROOT r = (f32[3]) tuple(ar)
}
ENTRY e {
  x = f32[3] parameter(0)
  id = u32[] replica-id()
  zero = u32[] constant(0)
  first = pred[] compare(id, zero), direction=EQ
  t = (f32[3]) tuple(x)
  ROOT c = (f32[3]) conditional(first, t, t), true_computation=on_true,
      false_computation=on_false
}
""",
    # a combined all-reduce (AllReduceCombiner's form, hlo_cost_analysis_test.cc:1334): the
    # binary reducer reduces each operand on its own
    "combined_all_reduce": "HloModule m, replica_count=2\n" + ADDF + """
ENTRY e {
  p0 = f32[2,2] parameter(0)
  p1 = f32[3] parameter(1)
  ROOT ar = (f32[2,2], f32[3]) all-reduce(p0, p1), replica_groups={{0,1}}, to_apply=addf
}
""",
    # XLA's mesh-axes replica groups (MeshAxesReplicaGroupList): a group varies the
    # named axes in the order named (device_ids: tests/test_parser.py, by hand; the
    # oracle's StableHLO route drops them)
    "mesh_axes_groups": "HloModule m, replica_count=4\n" + ADDF + """
ENTRY e {
  x = f32[2] parameter(0)
  ar = f32[2] all-reduce(x), replica_groups=mesh['a'=2,'b'=2] {'b'}, to_apply=addf
  ag = f32[8] all-gather(x), replica_groups=mesh['a'=2,'b'=2] {'b','a'}, dimensions={0}
  ag2 = f32[4] all-gather(x), replica_groups=mesh['a'=2,'b'=2] {'a'}, dimensions={0}
  ROOT t = (f32[2], f32[8], f32[4]) tuple(ar, ag, ag2)
}
""",
}


def per_device_inputs(module):
    """Small integers (every sum exact in f32 too), one array per device and parameter."""
    n = module.replica_count * module.num_partitions
    rng = np.random.default_rng(7)
    out = []
    for p in module.entry.parameters:
        dtype = p.shape.element_type.dtype
        out.append([rng.integers(-50, 50, size=p.shape.dims).astype(dtype) for _ in range(n)])
    return out


#: collective-permute of two operands (a tuple of two results, each permuted like a
#: single operand) on three replicas, 0 -> 1 -> 2: replica 0 has no source (zeros).
#: jaxlib's StableHLO route refuses several operands, so its values are by hand.
PERMUTE_SEVERAL = """HloModule m, replica_count=3
ENTRY e {
  x = f32[2] parameter(0)
  y = s32[3] parameter(1)
  ROOT cp = (f32[2], s32[3]) collective-permute(x, y), source_target_pairs={{0,1},{1,2}}
}
"""


def permute_several_inputs():
    """``xs``, ``ys``: the three replicas' operands of ``PERMUTE_SEVERAL``."""
    xs = [np.array([d, d + 0.5], np.float32) for d in range(3)]
    ys = [np.array([10 * d, -d, 7], np.int32) for d in range(3)]
    return xs, ys


#: Two replicas mapping ``body`` over f32 elements: elements above zero take branch ``t``,
#: an all-reduce (so the replicas' executions pair up by count, not by element), the
#: others ``f``, a negation. The tests add the ENTRY computation.
BRANCH_ALL_REDUCE = """HloModule m, replica_count=2
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
t { x = f32[] parameter(0)  ROOT ar = f32[] all-reduce(x), replica_groups={}, to_apply=add }
f { x = f32[] parameter(0)  ROOT n = f32[] negate(x) }
body {
  x = f32[] parameter(0)
  z = f32[] constant(0)
  p = pred[] compare(x, z), direction=GT
  ROOT c = f32[] conditional(p, x, x), true_computation=t, false_computation=f
}
"""


def collective_forms(extra: str = "", terms: str = "") -> str:
    """Computations ``add`` (s32) and ``body``, a map body over ``(x, y)`` (``s32``) on
    four replicas: collective-permute (a cycle on replicas 0 -> 1 -> 2 -> 0),
    collective-broadcast (groups {2,0}, {1,3}), all-to-all's tuple form (groups {0,3},
    {1,2}), and of the small array ``v = (x, y)``: reduce-scatter and all-to-all along
    dimension 0 (groups {0,1}, {2,3}). ``extra``: more instruction lines after those;
    ``terms``: the lines that weigh the values and add them up to the root ``o``
    (default: the weights of ``collective_forms_by_hand``)."""
    terms = terms or ("  k4 = s32[] constant(3)\n"
                      "  m4 = s32[] multiply(b, k4)\n"
                      "  w3 = s32[] add(w2, m4)\n"
                      "  k0 = s32[] constant(1000)  k1 = s32[] constant(100)\n"
                      "  k2 = s32[] constant(10)  k3 = s32[] constant(7)\n"
                      "  m0 = s32[] multiply(cp, k0)  m1 = s32[] multiply(cb, k1)"
                      "  m2 = s32[] multiply(a0, k2)\n"
                      "  m3 = s32[] multiply(a1, k3)\n"
                      "  w0 = s32[] add(m0, m1)  w1 = s32[] add(w0, m2)"
                      "  w2 = s32[] add(w1, m3)\n"
                      "  ROOT o = s32[] add(w3, r)\n")
    return ("add { a = s32[] parameter(0)  b = s32[] parameter(1)  ROOT s = s32[] add(a, b) }\n"
            "body {\n"
            "  x = s32[] parameter(0)  y = s32[] parameter(1)\n"
            "  cp = s32[] collective-permute(x), source_target_pairs={{0,1},{1,2},{2,0}}\n"
            "  cb = s32[] collective-broadcast(y), replica_groups={{2,0},{1,3}}\n"
            "  aa = (s32[], s32[]) all-to-all(x, y), replica_groups={{0,3},{1,2}}\n"
            "  a0 = s32[] get-tuple-element(aa), index=0\n"
            "  a1 = s32[] get-tuple-element(aa), index=1\n"
            "  x1 = s32[1] reshape(x)  y1 = s32[1] reshape(y)\n"
            "  v = s32[2] concatenate(x1, y1), dimensions={0}\n"
            "  rs = s32[1] reduce-scatter(v), replica_groups={{0,1},{2,3}}, dimensions={0}, "
            "to_apply=add\n"
            "  r = s32[] reshape(rs)\n"
            "  at = s32[2] all-to-all(v), replica_groups={{0,1},{2,3}}, dimensions={0}\n"
            "  at1 = s32[1] slice(at), slice={[1:2]}\n"
            "  b = s32[] reshape(at1)\n"
            f"{extra}{terms}}}\n")


def collective_forms_by_hand(xs, ys, d):
    """Replica ``d``'s value of ``collective_forms``'s default root, from the
    written semantics of each collective: ``cp * 1000 + cb * 100 + a0 * 10 + a1 * 7 +
    3 * b + r`` (``xs``, ``ys``: the four replicas' operands, numpy arrays)."""
    src = {1: 0, 2: 1, 0: 2}.get(d)
    cp = xs[src] if src is not None else 0  # the fourth replica receives nothing: zeros
    cb = ys[2] if d in (0, 2) else ys[1]  # the group's first replica is its root
    group = [0, 3] if d in (0, 3) else [1, 2]
    me = group.index(d)
    sent = xs if me == 0 else ys  # all-to-all: operand `me` of each participant
    a0, a1 = sent[group[0]], sent[group[1]]
    pair = [0, 1] if d < 2 else [2, 3]
    r = [xs[pair[0]] + xs[pair[1]], ys[pair[0]] + ys[pair[1]]][pair.index(d)]
    # all-to-all of (x, y) in pairs: element 1 is the partner pair[1]'s chunk `me`
    b = [xs, ys][pair.index(d)][pair[1]]
    return cp * 1000 + cb * 100 + a0 * 10 + a1 * 7 + 3 * b + r


#: the StableHLO spec's own collective_broadcast example (docs/spec.md, 4 replicas,
#: replica_groups [[2, 1]]), and a collective-reduce whose group leaves out replicas 0
#: and 3; XLA:CPU has neither op (jaxlib 0.10.2: collective-broadcast "not supported by
#: XLA:CPU ThunkEmitter", collective-reduce unknown to its parser)
OUTSIDE_GROUPS = """HloModule m, replica_count=4
add { a = s64[] parameter(0)  b = s64[] parameter(1)  ROOT s = s64[] add(a, b) }
ENTRY e {
  x = s64[1,2] parameter(0)
  cb = s64[1,2] collective-broadcast(x), replica_groups={{2,1}}
  cr = s64[1,2] collective-reduce(x), replica_groups={{1,2}}, to_apply=add
  ROOT t = (s64[1,2], s64[1,2]) tuple(cb, cr)
}
"""
