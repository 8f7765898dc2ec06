"""The verifier on XLA's own forms: modules XLA accepts (jaxlib compiles them, or its
sources say so) verify clean; modules a rule XLA states rejects are refused with that
rule; ``hloref.evaluate`` and ``hloref run`` verify unless told not to.
"""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")

import hloref  # noqa: E402
from hloref.errors import HloVerifyError  # noqa: E402

from verifier_common import mod as _mod, verify_text, xla_accepts_isolated  # noqa: E402


#: Evidence that XLA accepts a module: ``JAXLIB`` (jaxlib's XLA:CPU compiles it, checked
#: below) or the rule of XLA's verifier, cited (jaxlib reaches XLA:CPU through StableHLO,
#: whose op verifiers refuse some forms XLA's HLO verifier allows, and drops the header's
#: replica_count / num_partitions).
JAXLIB = "jaxlib compiles it"


_ADD = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"


#: Modules XLA's parser and verifier accept that hloref's verifier once refused.
ACCEPTED = [
    ("map_dimensions_attribute_ignored",
     _mod("q = f32[2,3] parameter(1)\n  ROOT r = f32[2,3] map(p, q), dimensions={}, to_apply=add",
          extra=_ADD), JAXLIB),
    ("fft_length_not_the_operand_dims",  # hlo_evaluator_test.cc, Fft1DZeroLength...
     _mod("ROOT r = c64[1,1,1,1] fft(p), fft_type=FFT, fft_length={0}",
          "p = c64[1,1,1,1] parameter(0)"), JAXLIB),
    ("irfft_zero_length_from_one",  # innermost dim fft_length/2+1 = 1
     _mod("ROOT r = f32[3,0] fft(p), fft_type=IRFFT, fft_length={0}",
          "p = c64[3,1] parameter(0)"), JAXLIB),
    ("irfft_zero_length_from_zero",
     _mod("ROOT r = f32[3,0] fft(p), fft_type=IRFFT, fft_length={0}",
          "p = c64[3,0] parameter(0)"), JAXLIB),
    ("rng_bit_generator_bits_alone",  # sharding_propagation_test.cc
     _mod("ROOT r = u32[3,4] rng-bit-generator(s), algorithm=rng_default",
          "s = u64[2] parameter(0)"), JAXLIB),
    ("all_gather_group_of_one_declares_its_shards",  # all_gather_decomposer_test.cc
     _mod("ROOT r = f32[2,12] all-gather(p), replica_groups={{0}}, channel_id=1, dimensions={1}"),
     JAXLIB),
    ("all_gather_flattened_ids",
     "HloModule m, num_partitions=16\nENTRY e {\n  p = f32[128] parameter(0)\n  ROOT ag = "
     "f32[1024] all-gather(p), dimensions={0}, use_global_device_ids=true, channel_id=1, "
     "replica_groups=[2,8]<=[16]\n}\n", JAXLIB),
    ("reduce_scatter_group_of_one_declares_its_shards",  # reduce_scatter_decomposer_test.cc
     _mod("ROOT r = f32[2,1] reduce-scatter(p), replica_groups={{0}}, dimensions={1}, "
          "to_apply=add", extra=_ADD), JAXLIB),
    ("all_reduce_reducer_not_checked",
     _mod("ROOT r = f32[2,3] all-reduce(p), replica_groups={}, to_apply=vsum",
          extra="vsum {\n  a = f32[2] parameter(0)\n  b = f32[2] parameter(1)\n  "
                "ROOT s = f32[2] add(a, b)\n}\n"),
     "hlo_verifier.cc HandleAllReduce / shape_inference.cc InferAllReduceShape: the operand "
     "shapes, to_apply not looked at (StableHLO's all_reduce refuses it)"),
    ("all_reduce_groups_of_two_sizes",  # CheckReplicaGroups: uniform sizes but all-reduce
     "HloModule m, replica_count=4\n" + _ADD + "ENTRY e {\n  p = f32[4] parameter(0)\n  "
     "ROOT r = f32[4] all-reduce(p), replica_groups={{0,1,2},{3}}, to_apply=add\n}\n", JAXLIB),
    ("compare_total_order_of_floats",
     _mod("ROOT r = pred[2,3] compare(p, p), direction=LT, type=TOTALORDER"), JAXLIB),
    ("collective_permute_of_two_arrays",
     "HloModule m, num_partitions=2\nENTRY e {\n  p0 = f32[128] parameter(0)\n  p1 = bf16[128] "
     "parameter(1)\n  ROOT r = (f32[128], bf16[128]) collective-permute(p0, p1), "
     "source_target_pairs={{0,1},{1,0}}, channel_id=1\n}\n",
     "hlo_verifier_test.cc CollectivePermuteMixedPrecisionOperandsAllowed (status ok); "
     "InferCollectivePermuteShape: the tuple of the operand shapes"),
    ("dynamic_slice_legacy_index_array",
     _mod("ROOT r = f32[1,2] dynamic-slice(p, i), dynamic_slice_sizes={1,2}",
          "p = f32[2,3] parameter(0)\n  i = s32[2] parameter(1)"),
     "shape_inference.cc InferDynamicSliceShape: one rank-1 start-index array (b/118437727); "
     "XLA:CPU's DynamicIndexSplitter splits it into scalars"),
    ("dynamic_update_slice_legacy_index_array",
     _mod("ROOT r = f32[2,3] dynamic-update-slice(p, u, i)",
          "p = f32[2,3] parameter(0)\n  u = f32[1,2] parameter(1)\n  i = s32[2] parameter(2)"),
     "shape_inference.cc InferDynamicUpdateSliceShape, legacy path as for dynamic-slice"),
    ("after_all_of_a_value",
     _mod("t = token[] after-all(p)\n  ROOT r = f32[2,3] add-dependency(p, t)"),
     "hlo_verifier.cc HandleAfterAll checks only the token result; xla/tests/token_hlo_test.cc "
     "runs after-all of an f32"),
    ("fusion_more_operands_than_parameters",
     _mod("q = f32[2,3] parameter(1)\n  ROOT r = f32[2,3] fusion(p, q), kind=kLoop, calls=fused",
          extra="fused {\n  ROOT a = f32[2,3] parameter(0)\n}\n"),
     "hlo_verifier_test.cc FusionMoreOperandsThanParameters (status ok)"),
    ("async_start_binds_a_prefix",
     "HloModule m\nasync_computation {\n  p0 = f32[2,3] parameter(0)\n  p1 = f32[3,2] parameter(1)\n"
     "  ROOT r = f32[3,2] custom-call(p0, p1), custom_call_target=\"foo\"\n}\nENTRY e {\n"
     "  p0 = f32[2,3] parameter(0)\n  p1 = f32[3,2] parameter(1)\n"
     "  s = ((f32[2,3]), f32[3,2], s32[]) async-start(p0), calls=async_computation\n"
     "  ROOT d = f32[3,2] async-done(s)\n}\n",
     "hlo_verifier_test.cc AsyncOps_StartBindPrefix_UpdateBindPrefix_Ok; "
     "CheckAsyncStartOperands: the operands are the shape at index {0}, a parameter prefix"),
]


@pytest.fixture(scope="module")
def xla_accepted_verdicts():
    texts = [a[1] for a in ACCEPTED if a[2] == JAXLIB]
    return dict(zip(texts, xla_accepts_isolated(texts)))


@pytest.mark.parametrize("name,text,evidence", ACCEPTED, ids=[a[0] for a in ACCEPTED])
def test_forms_xla_accepts_verify_clean(name, text, evidence, xla_accepted_verdicts):
    assert verify_text(text) == []
    if evidence == JAXLIB:
        ok, why = xla_accepted_verdicts[text]
        assert ok, f"XLA rejects {name}: {why}"


#: Modules XLA's verifier rejects by a rule the jaxlib route cannot show: (name, text,
#: hloref's message, XLA's rule).
REJECTED_BY_RULE = [
    ("all_gather_shards_vs_replica_count",
     "HloModule m, replica_count=4\nENTRY e {\n  p = f32[10,20] parameter(0)\n  ROOT ag = "
     "f32[10,40] all-gather(p), replica_groups={}, dimensions={1}\n}\n",
     "the declared shape has 2 shard(s) along dimension 1 (f32[10,20] -> f32[10,40]), but each "
     "replica group has 4 participants",
     "CheckCommonAllGatherInvariants: shard_count == GetSubgroupSize (the header's "
     "replica_count with empty groups, no channel_id)"),
    ("reduce_scatter_shards_across_partitions",
     "HloModule m, num_partitions=2\n" + _ADD + "ENTRY e {\n  p = f32[4,8] parameter(0)\n  "
     "ROOT rs = f32[4,4] reduce-scatter(p), replica_groups={{0,1}}, channel_id=1, "
     "dimensions={1}, to_apply=add\n}\n",
     "the declared shape has 2 shard(s) along dimension 1 (f32[4,8] -> f32[4,4]), but each "
     "replica group has 4 participants",
     "HandleReduceScatter: cross-replica-and-partition mode, 2 replicas x 2 partitions"),
    ("compare_type_of_another_kind",
     _mod("ROOT r = pred[2,3] compare(p, p), direction=LT, type=UNSIGNED"),
     "compare: type=UNSIGNED does not fit f32 operands; expected type=FLOAT or TOTALORDER",
     "CheckElementwiseInstruction (hlo_verifier_test.cc ComparisonTypeFloat); the StableHLO "
     "route drops the type"),
    ("collective_permute_target_past_the_replicas",
     "HloModule m, replica_count=3\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT r = f32[4] "
     "collective-permute(p), source_target_pairs={{0,1},{1,5}}\n}\n",
     "target 5 of source_target_pairs is out of range [0, 3)",
     "CheckDuplicatedSourceOrTarget: targets < replica_count without channel_id "
     "(hlo_verifier_test.cc CollectivePermuteCrossReplicaTargetOOR)"),
    ("all_reduce_groups_short_of_the_replicas",
     "HloModule m, replica_count=4\n" + _ADD + "ENTRY e {\n  p = f32[4] parameter(0)\n  "
     "ROOT r = f32[4] all-reduce(p), replica_groups={{0,1}}, to_apply=add\n}\n",
     "replica_groups name 2 ids but the module header's replica_count is 4",
     "CheckReplicaGroups: the groups name replica_count ids in cross-replica mode"),
    ("all_to_all_operands_vs_group",
     "HloModule m, replica_count=2\nENTRY e {\n  p0 = f32[128,4] parameter(0)\n  p1 = "
     "f32[128,4] parameter(1)\n  ROOT a2a = (f32[128,4], f32[128,4], f32[128,4]) "
     "all-to-all(p0, p1, p1), replica_groups={{0,1}}\n}\n",
     "the tuple form takes one operand per participant: 3 operands, replica groups of 2",
     "HandleAllToAll: operand_count == split_count (hlo_verifier_test.cc "
     "AllToAll_OperandCountMismatchWithReplicaGroupSize)"),
    ("all_to_all_split_dimension_vs_replicas",
     "HloModule m, replica_count=4\nENTRY e {\n  p = f32[6,2] parameter(0)\n  ROOT r = "
     "f32[6,2] all-to-all(p), dimensions={0}, replica_groups={}\n}\n",
     "split dimension 0 of f32[6,2] is not divisible by the split count 4",
     "InferAllToAllShape with GetSubgroupSize: empty groups span the header's replica_count"),
    ("all_gather_global_ids_without_channel",
     _mod("ROOT r = f32[4,3] all-gather(p), replica_groups={{0}}, use_global_device_ids=true, "
          "dimensions={0}"),
     "use_global_device_ids=true needs a channel_id",
     "GetCollectiveOpGroupMode: \"Cannot have use_global_device_ids=true without channel_id\""),
]


@pytest.mark.parametrize("name,text,message,rule", REJECTED_BY_RULE,
                         ids=[r[0] for r in REJECTED_BY_RULE])
def test_rejected_by_xla_rule(name, text, message, rule):
    errors = verify_text(text)
    assert len(errors) == 1 and message in str(errors[0]), errors
    assert errors[0].instruction is not None


def test_evaluate_verifies_unless_told_not_to():
    """``evaluate`` refuses a module XLA would reject, naming the instruction; with
    ``verify=False`` it evaluates it as written (the declared f32[3] of an add of two
    f32[2] is the documented example)."""
    import numpy as np
    bad = "HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  ROOT r = f32[3] add(a, a)\n}\n"
    assert not xla_accepts_isolated([bad])[0][0]
    x = np.array([1.0, 2.0], np.float32)
    with pytest.raises(HloVerifyError, match="declared shape f32\\[3\\] does not match the "
                                             "inferred shape f32\\[2\\]") as info:
        hloref.evaluate(bad, x)
    assert info.value.instruction == "r"
    assert hloref.evaluate(bad, x, verify=False).tolist() == [2.0, 4.0]
    module = hloref.parse(bad.replace("f32[3] add", "f32[2] add"))
    assert hloref.evaluate(module, x).tolist() == [2.0, 4.0]


def test_cli_run_verifies_unless_no_verify(tmp_path):
    import subprocess
    import sys
    path = tmp_path / "bad.hlo"
    path.write_text("HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  ROOT r = f32[3] add(a, a)\n}\n")
    run = [sys.executable, "-m", "hloref", "run", str(path), "--seed", "0"]
    proc = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "instruction %r" in proc.stderr and \
        "declared shape f32[3] does not match the inferred shape f32[2]" in proc.stderr
    proc = subprocess.run(run + ["--no-verify"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
