"""Verifier and shape inference against XLA as the oracle.

(a) modules JAX/XLA produce (lowered and optimized) verify clean;
(b) hand-broken modules are rejected by hloref *and* by XLA;
(c) Hypothesis: HLO text built from hloref's inferred shapes is accepted by XLA
    (test_verifier_inference.py, with more opcodes' inferred shapes);
(d) forms XLA accepts verify clean, and forms rejected by a rule XLA states
    (test_verifier_xla_forms.py).

XLA's text parser (``hlo_module_from_text``) alone does not check result shapes
(it accepts ``f32[3,2] add(f32[2,3], f32[2,3])``), so the XLA oracle here parses
the text, converts it to StableHLO (whose op verifiers re-infer result types)
and compiles it for the CPU (running XLA's HloVerifier); any failure = rejected.
"""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")
import jax.extend  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

import hloref  # noqa: E402
from hloref.errors import HloVerifyError  # noqa: E402
from hloref.shape_inference import ShapeError, infer_shape, shape_str  # noqa: E402
from hloref.shapes import array_shape  # noqa: E402
from hloref.verifier import verify_module  # noqa: E402

from verifier_common import (REDUCER, mod as _mod, verify_text, xla_accepts,  # noqa: E402
                             xla_accepts_isolated)


def _progs():
    x43 = jnp.ones((4, 3), jnp.float32)
    x35 = jnp.ones((3, 5), jnp.float32)
    v8 = jnp.arange(8, dtype=jnp.float32)
    img = jnp.ones((2, 8, 8, 3), jnp.float32)
    ker = jnp.ones((3, 3, 3, 4), jnp.float32)
    idx = jnp.array([0, 2, 1], jnp.int32)
    i32 = jnp.arange(12, dtype=jnp.int32).reshape(3, 4)

    def conv(a, k):
        return lax.conv_general_dilated(a, k, (2, 1), [(1, 1), (0, 2)], rhs_dilation=(1, 2),
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def grouped_conv(a, k):
        return lax.conv_general_dilated(a, k, (1, 1), "SAME", feature_group_count=3,
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def while_loop(x):
        return lax.fori_loop(0, 5, lambda i, c: c * 2.0 + i, x)

    def conds(p, x):
        a = lax.cond(p > 0, lambda y: y + 1, lambda y: y * 2, x)
        return lax.switch(jnp.int32(p), [jnp.sin, jnp.cos, jnp.tanh], a)

    def maxpool_grad(a):
        f = lambda b: lax.reduce_window(b, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1),
                                        "VALID").sum()
        return jax.grad(f)(a)

    def ints(a):
        return (lax.population_count(a), lax.clz(a), a << 2, a >> 1,
                lax.shift_right_logical(a, 3), a & 5, ~a, a % 3, jnp.abs(a), -a, lax.sign(a),
                lax.bitcast_convert_type(a, jnp.float32), jnp.clip(a, 1, 7))

    def floats(a):
        return (jnp.exp(a), jnp.log1p(a), jnp.expm1(a), lax.erf(a), jnp.floor(a),
                jnp.round(a), jnp.isfinite(a), lax.atan2(a, a + 1), a ** a, jnp.maximum(a, 0),
                lax.reduce_precision(a, 5, 10), lax.rsqrt(a), lax.cbrt(a),
                lax.complex(a, a), jnp.abs(lax.complex(a, a)), jnp.real(jnp.exp(1j * a)),
                a.astype(jnp.bfloat16), lax.bitcast_convert_type(a, jnp.uint8),
                jnp.where(a > 2, a, -a), lax.nextafter(a, a + 1))

    def shapes(a):
        return (a.T, a.reshape(12), jnp.concatenate([a, a, a[:1]], 0), a[::2, 1:3], a[::-1],
                lax.pad(a, 0.0, [(1, -1, 2), (-1, 2, 0)]), jnp.broadcast_to(a[:, None], (4, 2, 3)),
                lax.dynamic_slice(a, (1, 1), (2, 2)),
                lax.dynamic_update_slice(a, jnp.zeros((2, 2)), (1, 1)),
                lax.broadcasted_iota(jnp.int32, (3, 5), 1), jnp.cumsum(a, 0))

    def gather_scatter(a, i):
        return a[i], a.at[i].add(1.0), a.at[i, 1].set(5.0), jnp.take_along_axis(a, i[:, None], 0)

    def sorting(v, m):
        return (jnp.sort(v), jnp.argsort(v), lax.top_k(v, 3), jnp.argmax(m, axis=1),
                lax.sort((m, m.astype(jnp.int32)), dimension=0, num_keys=1))

    def batched(a, b):
        return jnp.einsum("bij,bjk->bik", a, b), jnp.einsum("ij,kj->ik", a[0], b[0].T)

    def rng(k):
        return jax.random.uniform(jax.random.key(0), (3,)), lax.rng_bit_generator(k, (2, 3))

    def spectral(a):
        return jnp.fft.fft(a.astype(jnp.complex64)), jnp.fft.rfft(a), jnp.fft.irfft(jnp.fft.rfft(a))

    def linalg(a):
        s = a @ a.T + 4 * jnp.eye(4)
        c = lax.linalg.cholesky(s)
        return lax.linalg.triangular_solve(c, jnp.ones((4, 2)), left_side=True, lower=True)

    def mixed_dot(a, b):
        return lax.dot(a.astype(jnp.bfloat16), b.astype(jnp.bfloat16),
                       preferred_element_type=jnp.float32)

    def softmax_grad(a):
        return jax.grad(lambda b: jax.nn.log_softmax(b).sum() + jnp.tanh(b).mean())(a)

    return [
        ("mlp", lambda a, b: jnp.tanh(a @ b).sum(axis=0) + 1, (x43, x35)),
        ("conv", conv, (img, ker)),
        ("grouped_conv", grouped_conv, (img, jnp.ones((3, 3, 1, 6), jnp.float32))),
        ("while", while_loop, (v8,)),
        ("conds", conds, (jnp.float32(1), v8)),
        ("maxpool_grad", maxpool_grad, (img,)),
        ("ints", ints, (i32,)),
        ("floats", floats, (v8,)),
        ("shapes", shapes, (x43,)),
        ("gather_scatter", gather_scatter, (x43, idx)),
        ("sorting", sorting, (v8, x43)),
        ("batched", batched, (jnp.ones((2, 3, 4)), jnp.ones((2, 4, 5)))),
        ("rng", rng, (jnp.zeros((2,), jnp.uint64) if jax.config.jax_enable_x64
                      else jnp.zeros((4,), jnp.uint32),)),
        ("spectral", spectral, (v8,)),
        ("linalg", linalg, (x43,)),
        ("mixed_dot", mixed_dot, (x43, x35)),
        ("softmax_grad", softmax_grad, (x43,)),
    ]


PROGS = _progs()


@pytest.mark.parametrize("name,fn,args", PROGS, ids=[p[0] for p in PROGS])
def test_jax_modules_verify_clean(name, fn, args):
    lowered = jax.jit(fn).lower(*args)
    for text in (lowered.as_text(dialect="hlo"), lowered.compile().as_text()):
        module = hloref.parse(text)
        errors = verify_module(module, collect=True)
        assert errors == [], f"{name}: {[str(e) for e in errors]}\n{text}"
        verify_module(module)  # raising form agrees


BROKEN = [
    ("add_shape", _mod("ROOT r = f32[3,2] add(p, p)"), "declared shape f32[3,2] does not match"),
    ("add_type", _mod("ROOT r = s32[2,3] add(p, p)"), "inferred shape f32[2,3]"),
    ("broadcast_shape", _mod("ROOT r = f32[4,2,5] broadcast(p), dimensions={0,2}"),
     "operand dimension 0 has size 2 but result dimension 0 has size 4"),
    ("broadcast_dims_rank", _mod("ROOT r = f32[4,2,3] broadcast(p), dimensions={1}"),
     "dimensions has 1 entries but the operand has rank 2"),
    ("broadcast_dim_out_of_range", _mod("ROOT r = f32[2,3] broadcast(p), dimensions={0,2}"),
     "dimension 2 is out of range"),
    ("dot_shape", _mod("ROOT r = f32[2,2] dot(p, q), lhs_contracting_dims={1}, "
                       "rhs_contracting_dims={0}",
                       "p = f32[2,3] parameter(0)\n  q = f32[3,4] parameter(1)"),
     "inferred shape f32[2,4]"),
    ("dot_contracting_mismatch", _mod("ROOT r = f32[2,4] dot(p, q), lhs_contracting_dims={1}, "
                                      "rhs_contracting_dims={0}",
                                      "p = f32[2,3] parameter(0)\n  q = f32[5,4] parameter(1)"),
     "contracting dimension sizes differ"),
    ("reduce_shape", _mod("z = f32[] constant(0)\n  ROOT r = f32[2] reduce(p, z), dimensions={0}, "
                          "to_apply=add_f32", extra=REDUCER), "inferred shape f32[3]"),
    ("reduce_dim_out_of_range", _mod("z = f32[] constant(0)\n  ROOT r = f32[2] reduce(p, z), "
                                     "dimensions={2}, to_apply=add_f32", extra=REDUCER),
     "dimension 2 is out of range"),
    ("slice_shape", _mod("ROOT r = f32[2,2] slice(p), slice={[0:2], [0:3]}"),
     "inferred shape f32[2,3]"),
    ("slice_out_of_bounds", _mod("ROOT r = f32[2,4] slice(p), slice={[0:2], [0:4]}"),
     "dimension 1: [0:4] is not within [0:3]"),
    ("concatenate_shape", _mod("ROOT r = f32[4,4] concatenate(p, p), dimensions={0}"),
     "inferred shape f32[4,3]"),
    ("concatenate_mismatch", _mod("ROOT r = f32[2,5] concatenate(p, q), dimensions={0}",
                                  "p = f32[2,3] parameter(0)\n  q = f32[2,2] parameter(1)"),
     "differs from operand 0 f32[2,3] in dimension 1"),
    ("pad_shape", _mod("z = f32[] constant(0)\n  ROOT r = f32[3,3] pad(p, z), padding=1_0x0_0_1"),
     "inferred shape f32[3,5]"),
    ("transpose_shape", _mod("ROOT r = f32[2,3] transpose(p), dimensions={1,0}"),
     "inferred shape f32[3,2]"),
    ("transpose_not_permutation", _mod("ROOT r = f32[3,3] transpose(p), dimensions={1,1}"),
     "is not a permutation"),
    ("gather_shape", _mod("ROOT r = f32[5,2] gather(p, i), offset_dims={1}, "
                          "collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, "
                          "slice_sizes={1,3}",
                          "p = f32[2,3] parameter(0)\n  i = s32[5,1] parameter(1)"),
     "inferred shape f32[5,3]"),
    ("wrong_operand_count", _mod("ROOT r = f32[2,3] negate(p, p)"), "expects 1 operand, got 2"),
    ("missing_attribute", _mod("ROOT r = f32[3,2] transpose(p)"),
     "missing required attribute dimensions"),
    ("gte_index_out_of_range", _mod("t = (f32[2,3], f32[2,3]) tuple(p, p)\n"
                                    "  ROOT r = f32[2,3] get-tuple-element(t), index=2"),
     "index 2 out of range for a tuple of 2 elements"),
    ("called_wrong_arity", _mod("z = f32[] constant(0)\n  ROOT r = f32[3] reduce(p, z), "
                                "dimensions={0}, to_apply=bad",
                                extra="bad {\n  a = f32[] parameter(0)\n  ROOT n = f32[] "
                                      "negate(a)\n}\n"),
     "to_apply=%bad takes 1 parameter(s), expected 2"),
    ("iota_dimension", _mod("ROOT r = s32[4] iota(), iota_dimension=1", params=""),
     "iota_dimension=1 out of range"),
    ("compare_result_type", _mod("ROOT r = f32[2,3] compare(p, p), direction=LT"),
     "inferred shape pred[2,3]"),
    ("select_pred_dims", _mod("ROOT r = f32[2,3] select(c, p, p)",
                              "p = f32[2,3] parameter(0)\n  c = pred[3,2] parameter(1)"),
     "predicate dimensions [3, 2] must be scalar or equal"),
    # XLA's CheckCommonAllGatherInvariants: 4 shards declared, groups of 8 flattened ids
    ("all_gather_shards_vs_group",
     "HloModule m, num_partitions=16\nENTRY e {\n  p = f32[128] parameter(0)\n  ROOT ag = "
     "f32[512] all-gather(p), dimensions={0}, use_global_device_ids=true, channel_id=1, "
     "replica_groups=[2,8]<=[16]\n}\n",
     "the declared shape has 4 shard(s) along dimension 0 (f32[128] -> f32[512]), but each "
     "replica group has 8 participants"),
    # XLA's HandleFusion: "Fused parameter count (2) is greater than the number of operands"
    ("fusion_fewer_operands_than_parameters",
     _mod("ROOT r = f32[2,3] fusion(p), kind=kLoop, calls=fused",
          extra="fused {\n  a = f32[2,3] parameter(0)\n  b = f32[2,3] parameter(1)\n  "
                "ROOT s = f32[2,3] add(a, b)\n}\n"),
     "the fused computation takes 2 parameters, more than the 1 operands passed"),
    # the legacy single start-index array must hold one index per operand dimension
    ("dynamic_slice_legacy_index_count",
     _mod("ROOT r = f32[1,2] dynamic-slice(p, i), dynamic_slice_sizes={1,2}",
          "p = f32[2,3] parameter(0)\n  i = s32[3] parameter(1)"),
     "start indices s32[3] must be an integer array of 2 (the operand rank) elements"),
    # XLA's CheckDuplicatedSourceOrTarget / CheckReplicaGroups
    ("collective_permute_target_twice",
     "HloModule m, replica_count=3\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT r = f32[4] "
     "collective-permute(p), source_target_pairs={{0,1},{2,1}}\n}\n",
     "target 1 appears more than once in source_target_pairs"),
    ("all_reduce_replica_id_twice",
     "HloModule m, replica_count=4\n" + REDUCER + "ENTRY e {\n  p = f32[4] parameter(0)\n  "
     "ROOT r = f32[4] all-reduce(p), replica_groups={{0,1},{1,2}}, to_apply=add_f32\n}\n",
     "replica id 1 is repeated in replica_groups"),
    ("all_gather_groups_of_two_sizes",
     "HloModule m, replica_count=4\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT r = f32[12] "
     "all-gather(p), replica_groups={{0,1,2},{3}}, dimensions={0}\n}\n",
     "replica groups must all have one size, got sizes [1, 3]"),
    ("all_reduce_global_ids_without_groups",
     "HloModule m, replica_count=2\n" + REDUCER + "ENTRY e {\n  p = f32[4] parameter(0)\n  "
     "ROOT r = f32[4] all-reduce(p), replica_groups={}, channel_id=1, "
     "use_global_device_ids=true, to_apply=add_f32\n}\n",
     "replica_groups must be given with use_global_device_ids=true"),
    # XLA's HandleIota: integral, floating point or complex element types only
    ("iota_of_pred", _mod("ROOT r = pred[4] iota(), iota_dimension=0", params=""),
     "iota: element type must be integral, floating point or complex, got pred"),
    ("rng_bit_generator_state_mismatch",
     _mod("ROOT r = (u64[3], u32[3,4]) rng-bit-generator(s), algorithm=rng_default",
          "s = u64[2] parameter(0)"),
     "inferred shape (u64[2], u32[3,4])"),
]


@pytest.fixture(scope="module")
def xla_verdicts():
    texts = [b[1] for b in BROKEN]
    return dict(zip(texts, xla_accepts_isolated(texts)))


@pytest.mark.parametrize("name,text,message", BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_modules_rejected(name, text, message, xla_verdicts):
    try:
        errors = verify_text(text)
    except hloref.HloParseError as e:  # parser-level rejection is fine for arity/attr errors
        errors = [e]
    assert errors, f"hloref accepted broken module {name}"
    assert any(message in str(e) for e in errors), [str(e) for e in errors]
    with pytest.raises((HloVerifyError, hloref.HloParseError)):
        verify_module(hloref.parse(text))
    ok, why = xla_verdicts[text]
    assert not ok, f"XLA accepted {name}, so hloref's rejection is wrong"


def test_error_names_instruction():
    text = BROKEN[0][1]
    with pytest.raises(HloVerifyError) as info:
        verify_module(hloref.parse(text))
    err = info.value
    assert err.instruction == "r" and err.computation == "main" and err.line == 6
    assert "expected" in str(err) or "inferred" in str(err)


def test_fixed_versions_accepted_by_both():
    # Sanity check of the oracle: the unbroken counterparts pass both.
    for text in (_mod("ROOT r = f32[2,3] add(p, p)"),
                 _mod("ROOT r = f32[4,2,3] broadcast(p), dimensions={1,2}"),
                 _mod("z = f32[] constant(0)\n  ROOT r = f32[3] reduce(p, z), dimensions={0}, "
                      "to_apply=add_f32", extra=REDUCER)):
        assert verify_text(text) == []
        assert xla_accepts(text)[0], xla_accepts(text)[1]


def test_parameter_numbering_and_entry_layout():
    gap = "HloModule g\nENTRY main {\n  p = f32[] parameter(0)\n  q = f32[] parameter(2)\n" \
          "  ROOT r = f32[] add(p, q)\n}\n"
    assert any("parameter number 2 is out of range" in str(e) for e in verify_text(gap))
    assert not xla_accepts_isolated([gap])[0][0]  # XLA aborts (CHECK failure) on this one
    layout = "HloModule l, entry_computation_layout={(f32[2]{0})->f32[3]{0}}\nENTRY main {\n" \
             "  p = f32[2] parameter(0)\n  ROOT r = f32[2] negate(p)\n}\n"
    errs = verify_text(layout)
    if isinstance(hloref.parse(layout).attrs.get("entry_computation_layout"), str):
        pytest.skip("parser keeps entry_computation_layout as raw text")
    assert any("entry_computation_layout result" in str(e) for e in errs), errs


def test_infer_shape_registry_standalone():
    f = array_shape("f32", (2, 3))
    assert shape_str(infer_shape("is-finite", [f], {})) == "pred[2,3]"
    assert shape_str(infer_shape("abs", [array_shape("c64", (2,))], {})) == "f32[2]"
    assert shape_str(infer_shape("complex", [f, f], {})) == "c64[2,3]"
    assert shape_str(infer_shape("convert", [f], {}, declared=array_shape("s8", (2, 3)))) == "s8[2,3]"
    assert shape_str(infer_shape("bitcast-convert", [f], {},
                                 declared=array_shape("u8", (2, 3, 4)))) == "u8[2,3,4]"
    assert shape_str(infer_shape("call", [f], {}, {"to_apply": ((f,), f)})) == "f32[2,3]"
    with pytest.raises(ShapeError, match="shift-left: operand element type must be"):
        infer_shape("shift-left", [f, f], {})
    with pytest.raises(ShapeError, match="and: operand element type"):
        infer_shape("and", [f, f], {})
    with pytest.raises(ShapeError, match="clamp: min must be a scalar"):
        infer_shape("clamp", [array_shape("f32", (3,)), f, f], {})
    assert shape_str(infer_shape("clamp", [array_shape("f32", ()), f, f], {})) == "f32[2,3]"
    t = infer_shape("topk", [array_shape("f32", (4, 9))], {"k": 3})
    assert shape_str(t) == "(f32[4,3], s32[4,3])"


PARAMS = "HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  ROOT p = f32[2] parameter(NUMBER)\n}\n"


@pytest.mark.parametrize("number,message,instruction", [
    # 2**32: once a 4-billion-element set of "missing" numbers (killed for memory)
    ("4294967296", "parameter number 4294967296 is out of range: computation e has 2 "
                   "parameter(s), numbered 0..1 (missing [1])", "p"),
    ("2", "parameter number 2 is out of range", "p"),
    ("0", "parameter number 0 is used more than once (also by %a)", "p"),
])
def test_parameter_numbers_one_clear_message(number, message, instruction, tmp_path):
    import subprocess
    import sys
    text = PARAMS.replace("NUMBER", number)
    errs = verify_text(text)
    assert len(errs) == 1 and message in str(errs[0]), errs
    assert errs[0].instruction == instruction
    assert not xla_accepts_isolated([text])[0][0]
    # the CLI: one line, no traceback, in bounded memory and time
    path = tmp_path / "m.hlo"
    path.write_text(text)
    proc = subprocess.run([sys.executable, "-m", "hloref", "parse", "--verify", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert message in proc.stderr


def test_signature_result_must_match_the_root():
    """XLA's parser: "Shape of computation f, s32[2], is not compatible with that of its
    root instruction a, f32[2]"; the parameter list of the signature is not checked."""
    from hloref.errors import HloParseError
    bad = "HloModule m\nENTRY %f (a: f32[2]) -> s32[2] {\n  ROOT a = f32[2] parameter(0)\n}\n"
    with pytest.raises(HloParseError, match="shape of computation f, s32\\[2\\], is not "
                                            "compatible with that of its root instruction a"):
        hloref.parse(bad)
    assert not xla_accepts_isolated([bad])[0][0]
    ignored = "HloModule m\nENTRY %f (a: f32[3]) -> f32[2]{0} {\n  ROOT a = f32[2] parameter(0)\n}\n"
    assert verify_text(ignored) == []
    assert xla_accepts_isolated([ignored])[0][0]


def test_async_start_operands_match_the_called_computation():
    """hlo_verifier_test.cc:1997: one operand for a two-parameter computation. XLA's
    verifier rejects it ("number of operands doesn't match operands for
    async_computation. Got: 1, but expected: 2"); so does hloref's, naming the
    instruction (the interpreter's error named only the computation)."""
    text = """HloModule Module
async_computation {
  p0 = f32[2,3] parameter(0)
  p1 = f32[3,2] parameter(1)
  ROOT custom-call = f32[3,2] custom-call(p0, p1), custom_call_target="foo"
}
ENTRY Entry {
  p0 = f32[2,3] parameter(0)
  async-start = ((f32[2,3], f32[3,2]), f32[3,2], s32[]) async-start(p0), calls=async_computation
  ROOT async-done = f32[3,2] async-done(async-start)
}
"""
    errs = verify_text(text)
    assert [e.instruction for e in errs] == ["async-start"], errs
    assert "calls=%async_computation takes 2 parameter(s), expected 1" in str(errs[0])
    assert not xla_accepts_isolated([text])[0][0]
    fixed = text.replace("async-start(p0)", "async-start(p0, p1)").replace(
        "p0 = f32[2,3] parameter(0)\n  async", "p0 = f32[2,3] parameter(0)\n  p1 = f32[3,2] parameter(1)\n  async")
    assert verify_text(fixed) == []
