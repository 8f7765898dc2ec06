"""ci/conformance.py and the modules beside it (conformance_*.py): module extraction from
C++ test sources and the comparison rule."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "ci"))
import conformance  # noqa: E402
import conformance_extract  # noqa: E402
import conformance_judge  # noqa: E402
import conformance_layout  # noqa: E402
import conformance_reasons  # noqa: E402
import conformance_report  # noqa: E402
import conformance_workers  # noqa: E402

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
    found = list(conformance_extract.literals_of(CPP))
    assert [line for line, _ in found] == [2, 7]
    assert "HloModule a" in found[0][1] and "ENTRY f" in found[1][1]
    src = tmp_path / "xla" / "service"
    src.mkdir(parents=True)
    (src / "x_test.cc").write_text(CPP + CPP)  # duplicates are scored once
    (src / "x.cc").write_text(CPP)             # not a test file
    cases = conformance_extract.extract(str(tmp_path))
    assert len(cases) == 2
    assert sorted(len(c.locations) for c in cases) == [2, 2]
    assert cases[0].locations[0].startswith("xla/service/x_test.cc:")


def test_multi_device_header():
    assert conformance_layout.multi_device("HloModule m, replica_count=1, num_partitions=4\n")
    assert not conformance_layout.multi_device("HloModule m, replica_count=1\nENTRY e {}")
    # host_offloader_test.cc:3523: the header goes on over several lines
    assert conformance_layout.multi_device("HloModule m,\nentry_computation_layout={(s32[2])->s32[2]},\n"
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
    return conformance_judge.judge(module, args, expected, ours, 0.01, None)


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
    assert conformance_judge.envelope_samples(0.1) == 8
    assert conformance_judge.envelope_samples(10.0) == 4
    assert conformance_judge.envelope_samples(100.0) == conformance_judge.MIN_SAMPLES


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
    assert conformance_reasons._init_not_identity(REDUCE_INIT.replace("INIT", init)) is not_identity


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
    assert conformance_reasons._fusion_returns_parameter(text.replace("RESULT", "p1"))
    assert not conformance_reasons._fusion_returns_parameter(text.replace("RESULT", "add"))


def test_resume_keeps_earlier_records_and_writes_them(tmp_path):
    cases = [conformance_extract.Case("k1", "HloModule a\nENTRY e { ROOT p = f32[] parameter(0) }\n",
                              ["x_test.cc:1"])]
    earlier = {"key": "k1", "where": "x_test.cc:1", "copies": 1, "xla_parse": "ok",
               "hloref_parse": "ok"}
    path = str(tmp_path / "r.json")
    records = conformance.score(cases, conformance_workers.Cache(None), evaluate=False, seed=0,
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
    case = conformance_extract.Case("slow", text, ["x_test.cc:1"])
    cache = conformance_workers.Cache(str(tmp_path))
    x = np.int32(0)
    cache.put("slow.parse", ("ok", None))  # XLA's answers, as the cache holds them
    cache.put("slow.run0", ("ok", ([x], np.int32(1000000000))))
    printed = module_to_text(hloref.parse(text))
    cache.put(hashlib.sha256(printed.encode()).hexdigest()[:16] + ".parse", ("ok", None))
    (rec,) = conformance.score([case], cache, evaluate=True, seed=0, timeout=5, progress=False)
    assert rec["hloref_parse"] == "ok" and rec["roundtrip_xla"] == "ok"
    assert rec["hloref_eval"] == "timeout" and "reason" not in rec
    text_summary = conformance_report.summary([rec], True, "test")
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
    assert conformance_reasons._init_not_identity(text.replace("INIT", "1"))
    assert not conformance_reasons._init_not_identity(text.replace("INIT", "0"))


def test_reason_for_promised_indices_and_locations():
    rec = {"where": "x_test.cc:1", "verdict": "mismatch"}
    scatter = "ENTRY e {\n  ROOT s = f32[4] scatter(a, i, u), unique_indices=true, to_apply=add\n}"
    assert "unique_indices=true" in conformance_reasons.reason_for(rec, scatter)
    assert conformance_reasons.reason_for(rec, scatter.replace("unique_indices=true", "x=1")) is None
    loop = {"where": "xla/service/while_loop_simplifier_test.cc:297", "hloref_eval": "HloLimitError"}
    assert "2^31 + 43 iterations" in conformance_reasons.reason_for(loop, "")


def test_merge_later_records_win_and_reasons_are_derived_again(tmp_path):
    import json
    text = "HloModule m\nENTRY e {\n  ROOT s = f32[4] scatter(a, i, u), unique_indices=true\n}\n"
    case = conformance_extract.Case("k", text, ["x_test.cc:1"])
    old = {"key": "k", "where": "x_test.cc:1", "xla_parse": "ok", "xla_run": "ok",
           "hloref_parse": "timeout"}
    new = {"key": "k", "where": "x_test.cc:1", "xla_parse": "ok", "xla_run": "ok",
           "hloref_parse": "ok", "hloref_eval": "ok", "verdict": "mismatch"}
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps([old]))
    b.write_text(json.dumps([new]))
    (rec,) = conformance_report.merge_records([str(a), str(b)], [case])
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
    assert conformance_layout.devices_for(text) == devices


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
    assert conformance_layout.devices_for(text) == devices


def test_devices_for_prefers_partitions_in_a_module_reading_partition_id():
    # flattened ids fit 8 replicas or 8 partitions; the module slices by partition-id,
    # as collective_pipelining_analyzer_test.cc (set_num_partitions(8)) runs it
    text = (f"HloModule m\n{SUM_REDUCER}ENTRY e {{\n  p = f32[8] parameter(0)\n"
            "  ar = f32[8] all-reduce(p), replica_groups={{0,1,2,3},{4,5,6,7}}, "
            "use_global_device_ids=true, channel_id=1, to_apply=sum\n"
            "  pid = u32[] partition-id()\n"
            "  ROOT ds = f32[1] dynamic-slice(ar, pid), dynamic_slice_sizes={1}\n}\n")
    assert conformance_layout.devices_for(text) == (1, 8)
    assert conformance_layout.devices_for(text.replace("partition-id", "replica-id")) == (8, 1)


def test_devices_for_keeps_the_headers_partitions_and_all_collectives_agree():
    # header: 2 partitions; an all-gather across replicas (no channel_id) of 4 -> the
    # test's layout keeps the 2 partitions: 4 replicas x 2 partitions
    text = (f"HloModule m, num_partitions=2\n{SUM_REDUCER}ENTRY e {{\n  p = f32[2,3] parameter(0)\n"
            "  ag = f32[8,3] all-gather(p), dimensions={0}\n"
            "  ROOT cp = f32[8,3] collective-permute(ag), channel_id=1, "
            "source_target_pairs={{0,1},{1,0}}\n}\n")
    assert conformance_layout.devices_for(text) == (4, 2)
    # a second all-gather needing 2, not 4: no layout fits both
    text = text.replace("ROOT cp = f32[8,3] collective-permute(ag), channel_id=1, "
                        "source_target_pairs={{0,1},{1,0}}",
                        "ROOT ag2 = f32[16,3] all-gather(ag), dimensions={0}")
    assert conformance_layout.devices_for(text) is None


def test_with_devices_rewrites_the_header_only():
    import hloref
    text = UNDER_DECLARED.replace(
        "HloModule m", "HloModule m, replica_count=1, entry_computation_layout={(f32[2]{0})->f32[2]{0}}")
    module = hloref.parse(conformance_layout.with_devices(text, 4, 1))
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
    assert conformance_layout.devices_for(text) == (4, 1)
    module = hloref.parse(conformance_layout.with_devices(text, 4, 1))
    assert (module.replica_count, module.num_partitions) == (4, 1)
    xs = [np.full((1, 64), d, np.float32) for d in range(4)]
    out = hloref.evaluate(module, xs)
    np.testing.assert_array_equal(out[2][:, 0], [0, 1, 2, 3])  # by hand: the 4 replicas in order


def test_judge_devices_flags_a_wrong_device_and_passes_rounding():
    import hloref
    text = conformance_layout.with_devices(UNDER_DECLARED, 4, 1)
    module = hloref.parse(text)
    xs = [np.array([0.1, 1e8], np.float32) * (d + 1) for d in range(4)]
    ours = hloref.evaluate(module, xs)
    # by hand: group {0,1} sums devices 0 and 1 in f32
    exact = [np.float32(x0) + np.float32(x1) for x0, x1 in zip(xs[0], xs[1])]
    np.testing.assert_array_equal(ours[0], np.array(exact, np.float32))
    # XLA's value by hand: groups {0,1} and {2,3} summed in f32
    good = [xs[0] + xs[1]] * 2 + [xs[2] + xs[3]] * 2
    assert conformance_judge.judge(module, [xs], good, ours, 0.01, None)["verdict"] == "match"
    bad = [np.array(o, copy=True) for o in ours]
    bad[2] = bad[2] * np.float32(1.001)
    assert conformance_judge.judge(module, [xs], bad, ours, 0.01, None)["verdict"] == "mismatch"


def test_judge_devices_narrow_all_reduce_does_not_deadlock():
    # f16: the envelope's excess-precision freedom must not evaluate the all-reduce a
    # second time on some devices only (a rendezvous the others never join)
    import hloref
    text = conformance_layout.with_devices(UNDER_DECLARED.replace("f32", "f16").replace(
        "ROOT ar = f16[2] all-reduce", "ar = f16[2] all-reduce") .replace(
        "to_apply=add\n}", "to_apply=add\n  ROOT m = f16[2] multiply(ar, x)\n}"), 4, 1)
    module = hloref.parse(text)
    xs = [np.linspace(-3, 3, 2).astype(np.float16) * (d + 1) for d in range(4)]
    ours = hloref.evaluate(module, xs)
    bad = [np.array(o, copy=True) for o in ours]
    bad[1] = (bad[1] + np.float16(0.5)).astype(np.float16)
    assert conformance_judge.judge(module, [xs], bad, ours, 0.01, None)["verdict"] == "mismatch"


# ---------------------------------------------------------------------------------------
# XLA:CPU answers that are valid under the written semantics (issue #11)
# ---------------------------------------------------------------------------------------

SORT_PAIRS = """HloModule m
lt {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT l = pred[] compare(a, b), direction=LT
}
ENTRY e {
  k = s32[SHAPE] parameter(0)
  v = s32[SHAPE] parameter(1)
  s = (s32[SHAPE], s32[SHAPE]) sort(k, v), dimensions={DIM}, to_apply=lt
  ROOT r = ROOT_OF_S
}
"""


def _sort_module(shape="4", dim=0, root="(s32[4], s32[4]) tuple(k2, v2)"):
    text = SORT_PAIRS.replace("SHAPE", shape).replace("DIM", str(dim))
    if root.startswith("("):
        text = text.replace("ROOT r = ROOT_OF_S", f"k2 = s32[{shape}] get-tuple-element(s), "
                            f"index=0\n  v2 = s32[{shape}] get-tuple-element(s), index=1\n"
                            f"  ROOT r = {root}")
    else:
        text = text.replace("ROOT_OF_S", root)
    return text


def test_unstable_sort_accepts_another_tie_order_and_rejects_wrong_ones():
    # keys 3 1 3 1 with values 10 20 30 40: the comparator (keys, LT) ties 1-1 and 3-3
    text = _sort_module()
    k, v = np.array([3, 1, 3, 1], np.int32), np.array([10, 20, 30, 40], np.int32)
    i32 = lambda *xs: np.array(xs, np.int32)  # noqa: E731
    # hloref sorts stably: (1,20) (1,40) (3,10) (3,30)
    assert _judge(text, [k, v], (i32(1, 1, 3, 3), i32(20, 40, 10, 30)))["verdict"] == "match"
    # XLA-like: both ties the other way round
    got = _judge(text, [k, v], (i32(1, 1, 3, 3), i32(40, 20, 30, 10)))
    assert got["verdict"] == "match" and got["accepted"] == conformance_judge.ACCEPTED_SORT, got
    # wrong order: descending (comparator(next, prev) holds for the middle pair)
    assert _judge(text, [k, v], (i32(3, 3, 1, 1), i32(10, 30, 20, 40)))["verdict"] == "mismatch"
    # wrong rows: (1,10) and (3,40) are no rows of the input, though each operand is a
    # permutation of its own input
    assert _judge(text, [k, v], (i32(1, 1, 3, 3), i32(10, 20, 30, 40)))["verdict"] == "mismatch"
    # a duplicated row, a lost one
    assert _judge(text, [k, v], (i32(1, 1, 3, 3), i32(40, 40, 30, 10)))["verdict"] == "mismatch"


def test_unstable_sort_only_the_values_returned():
    # the keys the root does not return are hloref's (1 1 3 3): XLA's values 40 20 30 10
    # make the rows (1,40) (1,20) (3,30) (3,10), all input rows, in order
    text = _sort_module(root="s32[4] get-tuple-element(s), index=1")
    k, v = np.array([3, 1, 3, 1], np.int32), np.array([10, 20, 30, 40], np.int32)
    got = _judge(text, [k, v], np.array([40, 20, 30, 10], np.int32))
    assert got["verdict"] == "match" and got.get("accepted") == conformance_judge.ACCEPTED_SORT
    # 10 first would be the row (1,10): not an input row
    assert _judge(text, [k, v], np.array([10, 20, 30, 40], np.int32))["verdict"] == "mismatch"


def test_unstable_sort_rows_stay_in_their_slice():
    # s32[2,2] sorted along dimension 1: slices [(1,5),(1,6)] and [(2,7),(2,8)]
    text = _sort_module(shape="2,2", dim=1, root="(s32[2,2], s32[2,2]) tuple(k2, v2)")
    k = np.array([[1, 1], [2, 2]], np.int32)
    v = np.array([[5, 6], [7, 8]], np.int32)
    ok = _judge(text, [k, v], (k, np.array([[6, 5], [8, 7]], np.int32)))
    assert ok["verdict"] == "match" and ok["accepted"] == conformance_judge.ACCEPTED_SORT
    # 7 and 6 change slices: each slice's rows are no longer its own
    assert _judge(text, [k, v], (k, np.array([[7, 5], [6, 8]], np.int32)))["verdict"] == "mismatch"


def test_stable_sort_is_not_given_the_tie_freedom():
    text = _sort_module().replace("to_apply=lt", "is_stable=true, to_apply=lt")
    k, v = np.array([3, 1, 3, 1], np.int32), np.array([10, 20, 30, 40], np.int32)
    got = _judge(text, [k, v], (np.array([1, 1, 3, 3], np.int32), np.array([40, 20, 30, 10], np.int32)))
    assert got["verdict"] == "mismatch"


def test_sort_result_valid_evaluates_the_written_comparator():
    # a comparator that is not a strict weak order (x + 1 < y, sort_utils_test.cc:233):
    # only compare(next, prev) must be false for every neighbour pair
    import hloref
    from hloref.fuzz import undetermined
    text = """HloModule m
c {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  one = f32[] constant(1)
  a1 = f32[] add(a, one)
  ROOT l = pred[] compare(a1, b), direction=LT
}
ENTRY e {
  x = f32[3] parameter(0)
  ROOT s = f32[3] sort(x), dimensions={0}, to_apply=c
}
"""
    module = hloref.parse(text)
    compare = undetermined.comparator_fn(module, module.computations["c"])
    x = np.array([0.5, 0.0, 3.0], np.float32)
    # 0.5 before 0: 0 + 1 < 0.5 is false, so in order; 3 then 0.5 would not be
    assert undetermined.sort_result_valid([x], [np.array([0.5, 0.0, 3.0], np.float32)], 0, compare)[0]
    assert not undetermined.sort_result_valid([x], [np.array([3.0, 0.5, 0.0], np.float32)], 0,
                                             compare)[0]
    # bit for bit: -0 is not the input's 0
    assert not undetermined.sort_result_valid([x], [np.array([0.5, -0.0, 3.0], np.float32)], 0,
                                             compare)[0]


SDS = """HloModule m
ENTRY e {
  p = s32[SHAPE] parameter(0)
  n = s32[] parameter(1)
  ROOT s = s32[BOUNDED] set-dimension-size(p, n), dimensions={DIM}
}
"""


def test_padded_dynamic_result_accepted_only_where_its_valid_region_agrees():
    text = SDS.replace("SHAPE", "4").replace("BOUNDED", "<=4").replace("DIM", "0")
    p, n = np.array([10, 20, 30, 40], np.int32), np.asarray(np.int32(2))
    # hloref: [10, 20]; XLA:CPU the bound, anything past the runtime size
    got = _judge(text, [p, n], np.array([10, 20, -7, 99], np.int32))
    assert got["verdict"] == "match" and got["accepted"] == conformance_judge.ACCEPTED_PADDED, got
    assert _judge(text, [p, n], np.array([10, 21, 30, 40], np.int32))["verdict"] == "mismatch"
    # not the bound: no padding to drop
    assert _judge(text, [p, n], np.array([10, 20, 30], np.int32))["verdict"] == "mismatch"


def test_padded_dynamic_result_two_dimensions_dense_first():
    # s32[2,<=3] of runtime size 2 x 2 from [[1,2,3],[4,5,6]]: hloref [[1,2],[4,5]];
    # XLA:CPU writes the 2 x 2 array densely at the start of the 2 x 3 buffer
    text = SDS.replace("SHAPE", "2,3").replace("BOUNDED", "2,<=3").replace("DIM", "1")
    p, n = np.array([[1, 2, 3], [4, 5, 6]], np.int32), np.asarray(np.int32(2))
    got = _judge(text, [p, n], np.array([[1, 2, 4], [5, 0, -1]], np.int32))
    assert got["verdict"] == "match" and got["accepted"] == conformance_judge.ACCEPTED_PADDED, got
    assert _judge(text, [p, n], np.array([[1, 2, 4], [6, 0, -1]], np.int32))["verdict"] == "mismatch"
    # the region [0:2, 0:2] per dimension is not how the buffer comes back
    assert _judge(text, [p, n], np.array([[1, 2, 0], [4, 5, 0]], np.int32))["verdict"] == "mismatch"


def test_size_parameters_seeded_within_their_bounds():
    text = """HloModule m
ENTRY e {
  a = s32[] parameter(0)
  b = s32[4] parameter(1)
  c = s64[] parameter(2)
  cc = s32[] convert(c)
  x = s32[<=4] set-dimension-size(b, a), dimensions={0}
  y = s32[2] slice(b), slice={[0:2]}
  z = s32[<=2] set-dimension-size(y, cc), dimensions={0}
  w = s32[<=4] set-dimension-size(b, cc), dimensions={0}
  ROOT t = (s32[<=4], s32[<=2], s32[<=4]) tuple(x, z, w)
}
"""
    # parameter 2 feeds two sizes: the smaller bound; the data parameter none
    assert conformance_workers.bounded_sizes(text) == {0: 4, 2: 2}
    drawn = np.array(-7, np.int32)
    assert conformance_workers._within(drawn, 2) == 2 and conformance_workers._within(drawn, 2).dtype == np.int32
    for v in range(0, 3):  # draws already inside keep their value
        assert conformance_workers._within(np.array(v, np.int64), 2) == v
