"""ci/conformance.py: module extraction from C++ test sources and the comparison rule."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "ci"))
import conformance  # noqa: E402

CPP = r'''
constexpr char kHlo[] = R"(
HloModule a
ENTRY e { ROOT p = f32[] parameter(0) }
)";
const char* not_hlo = R"(just text)";
auto m = ParseAndReturnVerifiedModule(R"hlo(
ENTRY f { ROOT q = s32[] parameter(0) }
)hlo");
'''


def test_raw_string_literals_with_entry_are_extracted(tmp_path):
    found = list(conformance.literals_of(CPP))
    assert [line for line, _ in found] == [2, 7]
    assert "HloModule a" in found[0][1] and "ENTRY f" in found[1][1]
    src = tmp_path / "xla" / "service"
    src.mkdir(parents=True)
    (src / "x_test.cc").write_text(CPP + CPP)  # duplicates are scored once
    (src / "x.cc").write_text(CPP)             # not a test file
    cases = conformance.extract(str(tmp_path))
    assert len(cases) == 2
    assert sorted(len(c.locations) for c in cases) == [2, 2]
    assert cases[0].locations[0].startswith("xla/service/x_test.cc:")


def test_multi_device_header():
    assert conformance._multi_device("HloModule m, replica_count=1, num_partitions=4\n")
    assert not conformance._multi_device("HloModule m, replica_count=1\nENTRY e {}")
    # host_offloader_test.cc:3523: the header goes on over several lines
    assert conformance._multi_device("HloModule m,\nentry_computation_layout={(s32[2])->s32[2]},\n"
                                     "num_partitions=2\n\nENTRY e {\n  ROOT p = s32[2] "
                                     "parameter(0)\n}\n")


SUM = """HloModule s
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
ENTRY e {
  x = f32[4096] parameter(0)
  zero = f32[] constant(0)
  ROOT r = f32[] reduce(x, zero), dimensions={0}, to_apply=add
}
"""


def _judge(text, args, expected):
    import hloref
    module = hloref.parse(text)
    ours = hloref.evaluate(module, *args)
    return conformance.judge(module, args, expected, ours, 0.01, None)


def test_judge_uses_the_envelope_of_hloref_diff():
    x = np.random.default_rng(0).standard_normal(4096).astype(np.float32)
    # another summation order in f32 (blocks of 8, as a vectorised loop sums): inside
    # the envelope of accumulation, not within 2 ULP of the correctly rounded sum
    other = np.float32(0)
    for lane in x.reshape(-1, 8).T.sum(axis=1, dtype=np.float32):
        other = np.float32(other + lane)
    exact = np.float32(np.sum(x.astype(np.float64)))
    assert other != exact
    got = _judge(SUM, [x], np.asarray(other))
    assert got["verdict"] == "envelope", got
    # one part in a hundred: far outside any summation order
    assert _judge(SUM, [x], np.asarray(exact * np.float32(1.01)))["verdict"] == "mismatch"
    assert _judge(SUM, [x], np.asarray(exact))["verdict"] == "match"


def test_judge_integers_exactly():
    text = "HloModule m\nENTRY e {\n  p = s32[2] parameter(0)\n  ROOT n = s32[2] negate(p)\n}\n"
    x = np.array([1, 2], np.int32)
    assert _judge(text, [x], np.array([-1, -2], np.int32))["verdict"] == "match"
    assert _judge(text, [x], np.array([-1, -3], np.int32))["verdict"] == "mismatch"


def test_envelope_samples_shrink_for_slow_modules():
    assert conformance.envelope_samples(0.1) == 8
    assert conformance.envelope_samples(10.0) == 4
    assert conformance.envelope_samples(100.0) == conformance.MIN_SAMPLES


REDUCE_INIT = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
ENTRY e {
  x = f32[8] parameter(0)
  INIT
  ROOT r = f32[] reduce(x, i), dimensions={0}, to_apply=add
}
"""


@pytest.mark.parametrize("init,not_identity", [
    ("i = f32[] parameter(1)", True),
    ("i = f32[] constant(1)", True),
    ("i = f32[] constant(0)", False),
    ("i = f32[] constant(-0)", False),
])
def test_init_not_identity_rule(init, not_identity):
    assert conformance._init_not_identity(REDUCE_INIT.replace("INIT", init)) is not_identity


def test_fusion_returning_a_parameter_rule():
    text = """HloModule mof
fusion_comp {
  p0 = f32[10] parameter(0)
  p1 = f32[10] parameter(1)
  add = f32[10] add(p0, p1)
  ROOT res = (f32[10], f32[10]) tuple(RESULT, add)
}
ENTRY main {
  p0 = f32[10] parameter(0)
  p1 = f32[10] parameter(1)
  ROOT f = (f32[10], f32[10]) fusion(p0, p1), kind=kLoop, calls=fusion_comp
}
"""
    assert conformance._fusion_returns_parameter(text.replace("RESULT", "p1"))
    assert not conformance._fusion_returns_parameter(text.replace("RESULT", "add"))


def test_resume_keeps_earlier_records_and_writes_them(tmp_path):
    cases = [conformance.Case("k1", "HloModule a\nENTRY e { ROOT p = f32[] parameter(0) }\n",
                              ["x_test.cc:1"])]
    earlier = {"key": "k1", "where": "x_test.cc:1", "copies": 1, "xla_parse": "ok",
               "hloref_parse": "ok"}
    path = str(tmp_path / "r.json")
    records = conformance.score(cases, conformance.Cache(None), evaluate=False, seed=0,
                                timeout=10, progress=False, done={"k1": earlier}, json_path=path)
    assert records == [earlier]  # no worker was started: the record is kept as it was


def test_a_slow_evaluation_is_a_time_out_of_the_evaluation_not_of_the_parse(tmp_path):
    # a loop of 10^9 steps cannot finish in 5 s; the module still parses and prints
    import hashlib

    import hloref
    from hloref.printer import module_to_text
    text = """HloModule slow
cond {
  s = s32[] parameter(0)
  n = s32[] constant(1000000000)
  ROOT lt = pred[] compare(s, n), direction=LT
}
body {
  s = s32[] parameter(0)
  one = s32[] constant(1)
  ROOT next = s32[] add(s, one)
}
ENTRY e {
  p = s32[] parameter(0)
  ROOT w = s32[] while(p), condition=cond, body=body
}
"""
    case = conformance.Case("slow", text, ["x_test.cc:1"])
    cache = conformance.Cache(str(tmp_path))
    x = np.int32(0)
    cache.put("slow.parse", ("ok", None))  # XLA's answers, as the cache holds them
    cache.put("slow.run0", ("ok", ([x], np.int32(1000000000))))
    printed = module_to_text(hloref.parse(text))
    cache.put(hashlib.sha256(printed.encode()).hexdigest()[:16] + ".parse", ("ok", None))
    (rec,) = conformance.score([case], cache, evaluate=True, seed=0, timeout=5, progress=False)
    assert rec["hloref_parse"] == "ok" and rec["roundtrip_xla"] == "ok"
    assert rec["hloref_eval"] == "timeout" and "reason" not in rec
    text_summary = conformance.summary([rec], True, "test")
    assert "| parsed by hloref | 1 | 100.00 % of the others |" in text_summary
    assert "timed out (`--timeout`) | 1 |" in text_summary


def test_init_not_identity_variadic():
    """hlo_parser_test.cc:693: a variadic (add, add) reduce-window with init 1."""
    text = """HloModule m
r {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = f32[] parameter(2)
  d = f32[] parameter(3)
  s = f32[] add(a, c)
  t = f32[] add(b, d)
  ROOT u = (f32[], f32[]) tuple(s, t)
}
ENTRY e {
  x = f32[] constant(42)
  i = f32[] constant(INIT)
  ROOT w = (f32[], f32[]) reduce-window(x, x, i, i), to_apply=r
}
"""
    assert conformance._init_not_identity(text.replace("INIT", "1"))
    assert not conformance._init_not_identity(text.replace("INIT", "0"))


def test_reason_for_promised_indices_and_locations():
    rec = {"where": "x_test.cc:1", "verdict": "mismatch"}
    scatter = "ENTRY e {\n  ROOT s = f32[4] scatter(a, i, u), unique_indices=true, to_apply=add\n}"
    assert "unique_indices=true" in conformance.reason_for(rec, scatter)
    assert conformance.reason_for(rec, scatter.replace("unique_indices=true", "x=1")) is None
    loop = {"where": "xla/service/while_loop_simplifier_test.cc:297", "hloref_eval": "HloLimitError"}
    assert "2^31 + 43 iterations" in conformance.reason_for(loop, "")


def test_merge_later_records_win_and_reasons_are_derived_again(tmp_path):
    import json
    text = "HloModule m\nENTRY e {\n  ROOT s = f32[4] scatter(a, i, u), unique_indices=true\n}\n"
    case = conformance.Case("k", text, ["x_test.cc:1"])
    old = {"key": "k", "where": "x_test.cc:1", "xla_parse": "ok", "xla_run": "ok",
           "hloref_parse": "timeout"}
    new = {"key": "k", "where": "x_test.cc:1", "xla_parse": "ok", "xla_run": "ok",
           "hloref_parse": "ok", "hloref_eval": "ok", "verdict": "mismatch"}
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps([old]))
    b.write_text(json.dumps([new]))
    (rec,) = conformance.merge_records([str(a), str(b)], [case])
    assert rec["hloref_parse"] == "ok" and "unique_indices=true" in rec["reason"]


UNDER_DECLARED = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
ENTRY e {
  x = f32[2] parameter(0)
  ROOT ar = f32[2] all-reduce(x), replica_groups={{0,1},{2,3}}, to_apply=add
}
"""


@pytest.mark.parametrize("text, devices", [
    (UNDER_DECLARED, (4, 1)),                                       # replica ids
    (UNDER_DECLARED.replace("to_apply", "channel_id=1, use_global_device_ids=true, to_apply"),
     (4, 1)),                                                       # flattened ids
    # collective-permute with channel_id: partition ids (GetCollectiveOpGroupMode)
    (UNDER_DECLARED.replace("all-reduce(x), replica_groups={{0,1},{2,3}}, to_apply=add",
                            "collective-permute(x), channel_id=1, source_target_pairs={{0,2}}"),
     (1, 3)),
    (UNDER_DECLARED.replace("HloModule m", "HloModule m, replica_count=4"), None),  # declared
    (UNDER_DECLARED.replace("{{0,1},{2,3}}", "{{0}}"), None),      # one device suffices
])
def test_devices_for_under_declared_collectives(text, devices):
    assert conformance.devices_for(text) == devices


SUM_REDUCER = "sum {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\n"


@pytest.mark.parametrize("body, devices", [
    # empty groups: the group is every replica, and 2 -> 8 along dimension 0 needs 4
    ("ROOT ag = f32[8,4] all-gather(p), dimensions={0}, replica_groups={}", (4, 1)),
    ("ROOT ag = f32[8,4] all-gather(p), dimensions={0}", (4, 1)),
    # reduce-scatter 2 -> 1 (the async form's shape is ((operand), result))
    ("ROOT rs = ((f32[2,4]), f32[1,4]) reduce-scatter-start(p), dimensions={0}, to_apply=sum",
     (2, 1)),
    # channel_id alone: replica groups across all partitions; {{0,1}} and 4 -> 1 on
    # dimension 1 is 4 shards: 2 replicas x 2 partitions (reduce_scatter_decomposer_test:
    # "Here, we have 2 replicas and 2 partitions, so 4 total shards")
    ("ROOT rs = f32[2,1] reduce-scatter(p), replica_groups={{0,1}}, channel_id=1, "
     "dimensions={1}, to_apply=sum", (2, 2)),
    # all-to-all with channel_id (no use_global_device_ids field): partitions; its tuple
    # form has one operand per participant
    ("ROOT a2a = (f32[2,4], f32[2,4], f32[2,4]) all-to-all(p, p, p), channel_id=1", (1, 3)),
    # the same shapes without channel_id: replicas
    ("ROOT a2a = (f32[2,4], f32[2,4], f32[2,4]) all-to-all(p, p, p)", (3, 1)),
    # contradictory: the group {0} is one device, the shapes say 4
    ("ROOT ag = f32[8,4] all-gather(p), dimensions={0}, replica_groups={{0}}", None),
    # consistent on the header's one device: nothing to infer
    ("ROOT ar = f32[2,4] all-reduce(p), replica_groups={}, to_apply=sum", None),
])
def test_devices_for_reads_the_layout_from_the_collectives_shapes(body, devices):
    text = f"HloModule m\n{SUM_REDUCER}ENTRY e {{\n  p = f32[2,4] parameter(0)\n  {body}\n}}\n"
    assert conformance.devices_for(text) == devices


def test_devices_for_prefers_partitions_in_a_module_reading_partition_id():
    # flattened ids fit 8 replicas or 8 partitions; the module slices by partition-id,
    # as collective_pipelining_analyzer_test.cc (set_num_partitions(8)) runs it
    text = (f"HloModule m\n{SUM_REDUCER}ENTRY e {{\n  p = f32[8] parameter(0)\n"
            "  ar = f32[8] all-reduce(p), replica_groups={{0,1,2,3},{4,5,6,7}}, "
            "use_global_device_ids=true, channel_id=1, to_apply=sum\n"
            "  pid = u32[] partition-id()\n"
            "  ROOT ds = f32[1] dynamic-slice(ar, pid), dynamic_slice_sizes={1}\n}\n")
    assert conformance.devices_for(text) == (1, 8)
    assert conformance.devices_for(text.replace("partition-id", "replica-id")) == (8, 1)


def test_devices_for_keeps_the_headers_partitions_and_all_collectives_agree():
    # header: 2 partitions; an all-gather across replicas (no channel_id) of 4 -> the
    # test's layout keeps the 2 partitions: 4 replicas x 2 partitions
    text = (f"HloModule m, num_partitions=2\n{SUM_REDUCER}ENTRY e {{\n  p = f32[2,3] parameter(0)\n"
            "  ag = f32[8,3] all-gather(p), dimensions={0}\n"
            "  ROOT cp = f32[8,3] collective-permute(ag), channel_id=1, "
            "source_target_pairs={{0,1},{1,0}}\n}\n")
    assert conformance.devices_for(text) == (4, 2)
    # a second all-gather needing 2, not 4: no layout fits both
    text = text.replace("ROOT cp = f32[8,3] collective-permute(ag), channel_id=1, "
                        "source_target_pairs={{0,1},{1,0}}",
                        "ROOT ag2 = f32[16,3] all-gather(ag), dimensions={0}")
    assert conformance.devices_for(text) is None


def test_with_devices_rewrites_the_header_only():
    import hloref
    text = UNDER_DECLARED.replace(
        "HloModule m", "HloModule m, replica_count=1, entry_computation_layout={(f32[2]{0})->f32[2]{0}}")
    module = hloref.parse(conformance.with_devices(text, 4, 1))
    assert (module.replica_count, module.num_partitions) == (4, 1)
    assert module.entry.root.opcode == "all-reduce"
    xs = [np.full(2, d, np.float32) for d in range(4)]
    out = hloref.evaluate(module, xs)
    np.testing.assert_array_equal(out[3], np.full(2, 2 + 3, np.float32))  # by hand: {2,3}


def test_with_devices_gives_a_module_without_header_one():
    # all_gather_remove_degenerate_dims_test.cc writes only ENTRY: the count must still
    # reach both runs (it was silently left at one device)
    import hloref
    text = "ENTRY e {\n  p = f32[1,64] parameter(0)\n  ROOT ag = f32[4,64] all-gather(p), dimensions={0}\n}\n"
    assert conformance.devices_for(text) == (4, 1)
    module = hloref.parse(conformance.with_devices(text, 4, 1))
    assert (module.replica_count, module.num_partitions) == (4, 1)
    xs = [np.full((1, 64), d, np.float32) for d in range(4)]
    out = hloref.evaluate(module, xs)
    np.testing.assert_array_equal(out[2][:, 0], [0, 1, 2, 3])  # by hand: the 4 replicas in order


def test_judge_devices_flags_a_wrong_device_and_passes_rounding():
    import hloref
    text = conformance.with_devices(UNDER_DECLARED, 4, 1)
    module = hloref.parse(text)
    xs = [np.array([0.1, 1e8], np.float32) * (d + 1) for d in range(4)]
    ours = hloref.evaluate(module, xs)
    # by hand: group {0,1} sums devices 0 and 1 in f32
    exact = [np.float32(x0) + np.float32(x1) for x0, x1 in zip(xs[0], xs[1])]
    np.testing.assert_array_equal(ours[0], np.array(exact, np.float32))
    # XLA's value by hand: groups {0,1} and {2,3} summed in f32
    good = [xs[0] + xs[1]] * 2 + [xs[2] + xs[3]] * 2
    assert conformance.judge(module, [xs], good, ours, 0.01, None)["verdict"] == "match"
    bad = [np.array(o, copy=True) for o in ours]
    bad[2] = bad[2] * np.float32(1.001)
    assert conformance.judge(module, [xs], bad, ours, 0.01, None)["verdict"] == "mismatch"


def test_judge_devices_narrow_all_reduce_does_not_deadlock():
    # f16: the envelope's excess-precision freedom must not evaluate the all-reduce a
    # second time on some devices only (a rendezvous the others never join)
    import hloref
    text = conformance.with_devices(UNDER_DECLARED.replace("f32", "f16").replace(
        "ROOT ar = f16[2] all-reduce", "ar = f16[2] all-reduce") .replace(
        "to_apply=add\n}", "to_apply=add\n  ROOT m = f16[2] multiply(ar, x)\n}"), 4, 1)
    module = hloref.parse(text)
    xs = [np.linspace(-3, 3, 2).astype(np.float16) * (d + 1) for d in range(4)]
    ours = hloref.evaluate(module, xs)
    bad = [np.array(o, copy=True) for o in ours]
    bad[1] = (bad[1] + np.float16(0.5)).astype(np.float16)
    assert conformance.judge(module, [xs], bad, ours, 0.01, None)["verdict"] == "mismatch"
