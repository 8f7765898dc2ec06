"""Verifier and shape inference against XLA as the oracle.

(a) modules JAX/XLA produce (lowered and optimized) verify clean;
(b) hand-broken modules are rejected by hloref *and* by XLA;
(c) Hypothesis: HLO text built from hloref's inferred shapes is accepted by XLA.

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
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import hloref  # noqa: E402
from hloref.attrs import PaddingDim, SliceDim  # noqa: E402
from hloref.errors import HloVerifyError  # noqa: E402
from hloref.shape_inference import (ShapeError, infer_broadcast, infer_concatenate,  # noqa: E402
                                    infer_dot, infer_pad, infer_reduce, infer_shape,
                                    infer_slice, infer_transpose, shape_str)
from hloref.shapes import ArrayShape, TupleShape, array_shape  # noqa: E402
from hloref.verifier import verify_module  # noqa: E402


# --------------------------------------------------------------------------- XLA oracle

def _xla_client():
    from jaxlib import xla_client as xc
    return xc


def xla_accepts(text: str) -> tuple[bool, str]:
    """(True, "") when XLA parses, type-checks and compiles ``text``."""
    xc = _xla_client()
    from jax._src.interpreters import mlir as jmlir
    from jax._src.lib.mlir import ir
    from jaxlib import _jax
    try:
        m = xc.hlo.hlo_module_from_text(text)
        bc = _jax.mlir.hlo_to_stablehlo(m.as_serialized_hlo_module_proto())
        backend = jax.extend.backend.get_backend("cpu")
        devs = xc.DeviceList(tuple(backend.local_devices()[:1]))
        with jmlir.make_ir_context():
            mod = ir.Module.parse(bc)
            backend.compile_and_load(mod, executable_devices=devs,
                                     compile_options=xc.CompileOptions())
    except Exception as e:  # noqa: BLE001 - any failure means XLA rejects the module
        return False, f"{type(e).__name__}: {e}"
    return True, ""


_CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from test_verifier import xla_accepts
for line in sys.stdin:
    ok, why = xla_accepts(json.loads(line))
    print(json.dumps([ok, why[:2000]]), flush=True)
"""


def xla_accepts_isolated(texts: list[str]) -> list[tuple[bool, str]]:
    """``xla_accepts`` for each text in a child process: XLA's parser *crashes*
    (SIGSEGV) on some invalid modules (get-tuple-element index out of range), which
    counts as not accepting them. The child restarts after a crash."""
    import json
    import os
    import subprocess
    import sys
    results: list[tuple[bool, str]] = []
    while len(results) < len(texts):
        todo = texts[len(results):]
        proc = subprocess.run([sys.executable, "-c", _CHILD, os.path.dirname(__file__)],
                              input="".join(json.dumps(t) + "\n" for t in todo),
                              capture_output=True, text=True, timeout=300)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("[")]
        results.extend(tuple(json.loads(ln)) for ln in lines)
        if len(results) < len(texts):  # the child died on texts[len(results)]
            results.append((False, f"XLA crashed (exit status {proc.returncode})"))
    return results


def verify_text(text: str):
    return verify_module(hloref.parse(text), collect=True)


# --------------------------------------------------------------------------- (a) JAX programs

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


# --------------------------------------------------------------------------- (b) broken modules

REDUCER = """add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


def _mod(body: str, params: str = "p = f32[2,3] parameter(0)", extra: str = "") -> str:
    return f"HloModule broken\n\n{extra}\nENTRY main {{\n  {params}\n  {body}\n}}\n"


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
    # Not asserted against XLA: its text parser keeps an inconsistent layout and the
    # StableHLO route drops it; the check mirrors HloVerifier's
    # VerifyEntryComputationLayout ("Shape of the root instruction of entry
    # computation ... should be compatible to one specified in module's entry
    # computation layout"), which that route does not run.


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


# --------------------------------------------------------------------------- (c) Hypothesis

def _text(s) -> str:
    return shape_str(s)


def _check_agrees(body_lines: list[str], params: list[ArrayShape], root_shape, extra: str = ""):
    ps = "\n  ".join(f"p{i} = {_text(s)} parameter({i})" for i, s in enumerate(params))
    text = f"HloModule h\n\n{extra}\nENTRY main {{\n  {ps}\n  " + "\n  ".join(body_lines) + "\n}\n"
    ok, why = xla_accepts(text)
    assert ok, f"XLA rejects hloref's inferred shape {_text(root_shape)}:\n{text}\n{why}"
    assert verify_text(text) == []


dims_st = st.lists(st.integers(0, 4), min_size=0, max_size=4)
HYP = settings(max_examples=30, deadline=None, derandomize=True,
               suppress_health_check=list(HealthCheck))


@HYP
@given(dims_st, st.data())
def test_hyp_broadcast(dims, data):
    out_rank = data.draw(st.integers(len(dims), len(dims) + 2))
    mapping = sorted(data.draw(st.lists(st.integers(0, out_rank - 1), min_size=len(dims),
                                        max_size=len(dims), unique=True))) if dims else []
    out = [data.draw(st.integers(0, 3)) for _ in range(out_rank)]
    for i, d in enumerate(mapping):
        out[d] = dims[i]
    s = array_shape("f32", dims)
    r = infer_broadcast(s, dimensions=tuple(mapping), result_dims=tuple(out))
    dtext = ",".join(map(str, mapping))
    _check_agrees([f"ROOT r = {_text(r)} broadcast(p0), dimensions={{{dtext}}}"], [s], r)


@HYP
@given(dims_st, st.data())
def test_hyp_transpose(dims, data):
    perm = data.draw(st.permutations(list(range(len(dims)))))
    s = array_shape("s32", dims)
    r = infer_transpose(s, dimensions=tuple(perm))
    _check_agrees([f"ROOT r = {_text(r)} transpose(p0), dimensions={{{','.join(map(str, perm))}}}"],
                  [s], r)


@HYP
@given(st.lists(st.integers(0, 6), min_size=1, max_size=3), st.data())
def test_hyp_slice(dims, data):
    sl = []
    for d in dims:
        start = data.draw(st.integers(0, d))
        limit = data.draw(st.integers(start, d))
        sl.append(SliceDim(start, limit, data.draw(st.integers(1, 3))))
    s = array_shape("f32", dims)
    r = infer_slice(s, slice=tuple(sl))
    txt = ", ".join(f"[{x.start}:{x.limit}:{x.stride}]" for x in sl)
    _check_agrees([f"ROOT r = {_text(r)} slice(p0), slice={{{txt}}}"], [s], r)


@HYP
@given(st.lists(st.integers(0, 5), min_size=1, max_size=3), st.data())
def test_hyp_pad(dims, data):
    cfg = []
    for d in dims:
        interior = data.draw(st.integers(0, 2))
        full = d + max(d - 1, 0) * interior
        lo = data.draw(st.integers(-full, 3))
        hi = data.draw(st.integers(-(full + lo) if full + lo > 0 else 0, 3))
        cfg.append(PaddingDim(lo, hi, interior))
    s = array_shape("f32", dims)
    r = infer_pad(s, array_shape("f32", ()), padding=tuple(cfg))
    txt = "x".join(f"{p.low}_{p.high}_{p.interior}" for p in cfg)
    _check_agrees(["z = f32[] constant(0)", f"ROOT r = {_text(r)} pad(p0, z), padding={txt}"],
                  [s], r)


@HYP
@given(st.data())
def test_hyp_dot(data):
    nb, nc = data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))
    lf, rf = data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))
    size = st.integers(1, 3)
    batch = [data.draw(size) for _ in range(nb)]
    contr = [data.draw(size) for _ in range(nc)]
    lroles = data.draw(st.permutations(["b"] * nb + ["c"] * nc + ["f"] * lf))
    rroles = data.draw(st.permutations(["b"] * nb + ["c"] * nc + ["f"] * rf))

    def build(roles):
        dims, bd, cd, bi, ci = [], [], [], 0, 0
        for pos, r in enumerate(roles):
            if r == "b":
                dims.append(batch[bi]); bd.append(pos); bi += 1
            elif r == "c":
                dims.append(contr[ci]); cd.append(pos); ci += 1
            else:
                dims.append(data.draw(size))
        return dims, bd, cd

    ld, lb, lc = build(lroles)
    rd, rb, rc = build(rroles)
    a, b = array_shape("f32", ld), array_shape("f32", rd)
    r = infer_dot(a, b, lhs_batch_dims=tuple(lb), rhs_batch_dims=tuple(rb),
                  lhs_contracting_dims=tuple(lc), rhs_contracting_dims=tuple(rc))
    j = lambda xs: ",".join(map(str, xs))
    _check_agrees([f"ROOT r = {_text(r)} dot(p0, p1), lhs_batch_dims={{{j(lb)}}}, "
                   f"rhs_batch_dims={{{j(rb)}}}, lhs_contracting_dims={{{j(lc)}}}, "
                   f"rhs_contracting_dims={{{j(rc)}}}"], [a, b], r)


@HYP
@given(st.lists(st.integers(0, 4), min_size=1, max_size=4), st.data())
def test_hyp_reduce(dims, data):
    red = sorted(data.draw(st.lists(st.integers(0, len(dims) - 1), unique=True)))
    s = array_shape("f32", dims)
    z = array_shape("f32", ())
    r = infer_reduce(s, z, dimensions=tuple(red), to_apply=((z, z), z))
    _check_agrees(["z = f32[] constant(0)",
                   f"ROOT r = {_text(r)} reduce(p0, z), dimensions={{{','.join(map(str, red))}}}, "
                   "to_apply=add_f32"], [s], r, extra=REDUCER)


@HYP
@given(st.lists(st.integers(0, 4), min_size=1, max_size=3), st.data())
def test_hyp_concatenate(dims, data):
    d = data.draw(st.integers(0, len(dims) - 1))
    n = data.draw(st.integers(1, 3))
    shapes = []
    for _ in range(n):
        dd = list(dims)
        dd[d] = data.draw(st.integers(0, 4))
        shapes.append(array_shape("f32", dd))
    r = infer_concatenate(*shapes, dimensions=(d,))
    ops = ", ".join(f"p{i}" for i in range(n))
    _check_agrees([f"ROOT r = {_text(r)} concatenate({ops}), dimensions={{{d}}}"], shapes, r)


# --------------------------------------------------------------------------- more opcodes vs XLA

MORE = {
"conv_bgc": ("lhs = f32[4,5,5,2] parameter(0)\n  rhs = f32[3,3,2,6] parameter(1)", "convolution(lhs, rhs), window={size=3x3 stride=2x1 pad=1_1x0_2 lhs_dilate=1x2 rhs_dilate=2x1}, dim_labels=b01f_01io->b01f, batch_group_count=2"),
"conv_fgc": ("lhs = f32[4,5,5,6] parameter(0)\n  rhs = f32[3,3,2,6] parameter(1)", "convolution(lhs, rhs), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->bf01, feature_group_count=3"),
"gather_batching": ("p = f32[3,4,5] parameter(0)\n  i = s32[3,2,1] parameter(1)", "gather(p, i), offset_dims={2}, collapsed_slice_dims={1}, operand_batching_dims={0}, start_indices_batching_dims={0}, start_index_map={1}, index_vector_dim=2, slice_sizes={1,1,5}"),
"reduce_window": ("p = f32[7,9] parameter(0)\n  z = f32[] constant(0)", "reduce-window(p, z), window={size=2x3 stride=2x2 pad=1_0x2_2 lhs_dilate=2x1 rhs_dilate=1x2}, to_apply=add_f32"),
"dynamic_slice": ("p = f32[7,9] parameter(0)\n  i = s32[] parameter(1)", "dynamic-slice(p, i, i), dynamic_slice_sizes={3,0}"),
"tri": ("a = f32[2,4,4] parameter(0)\n  b = f32[2,3,4] parameter(1)", "triangular-solve(a, b), left_side=false, lower=true, transpose_a=NO_TRANSPOSE"),
"chol": ("a = f32[2,4,4] parameter(0)", "cholesky(a), lower=true"),
"bn": ("a = f32[2,4,3] parameter(0)\n  s = f32[4] parameter(1)", "batch-norm-training(a, s, s), epsilon=0.001, feature_index=1"),
"bng": ("a = f32[2,4,3] parameter(0)\n  s = f32[4] parameter(1)", "batch-norm-grad(a, s, s, s, a), epsilon=0.001, feature_index=1"),
"irfft": ("a = c64[2,3,5] parameter(0)", "fft(a), fft_type=IRFFT, fft_length={3,8}"),
"rfft": ("a = f32[2,3,8] parameter(0)", "fft(a), fft_type=RFFT, fft_length={3,8}"),
"topk": ("a = f32[2,9] parameter(0)", "topk(a), k=4, largest=true"),
"map": ("a = f32[2,9] parameter(0)", "map(a, a), dimensions={0,1}, to_apply=add_f32"),
"rng": ("a = f32[] parameter(0)", "rng(a, a), distribution=rng_uniform", "f32[3,4]"),
"allreduce": ("a = f32[2,9] parameter(0)\n  b = s32[3] parameter(1)", "all-reduce(a, a), replica_groups={}, to_apply=add_f32"),
"sort2": ("a = f32[2,9] parameter(0)\n  b = s32[2,9] parameter(1)", "sort(a, b), dimensions={1}, to_apply=cmp"),
"bcc": ("a = f32[2,3] parameter(0)", "bitcast-convert(a), ", "u16[2,3,2]"),
"bcc2": ("a = u8[2,4] parameter(0)", "bitcast-convert(a), ", "f32[2]"),
"scatter2": ("o = f32[5,3] parameter(0)\n  i = s32[2,1] parameter(1)\n  u = f32[2,3] parameter(2)", "scatter(o, o, i, u, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add2"),
"sas": ("o = f32[6,6] parameter(0)\n  s = f32[3,2] parameter(1)\n  z = f32[] constant(0)", "select-and-scatter(o, s, z), window={size=2x3 stride=2x3}, select=ge, scatter=add_f32"),
}
MORE_CALLEES = """add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = pred[] compare(a, b), direction=GE
}
cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT s = pred[] compare(a, b), direction=LT
}
add2 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = f32[] parameter(2)
  d = f32[] parameter(3)
  x = f32[] add(a, c)
  y = f32[] add(b, d)
  ROOT t = (f32[], f32[]) tuple(x, y)
}
"""


@pytest.mark.parametrize("name", sorted(MORE))
def test_more_opcodes_inferred_shape_accepted_by_xla(name):
    """Infer the result of each op with hloref, write it as the declared shape,
    and check XLA compiles the module (and hloref verifies it clean)."""
    from hloref.verifier import _Verifier
    case = MORE[name]
    params, op = case[0], case[1].rstrip(", ")
    placeholder = case[2] if len(case) > 2 else "f32[]"
    text = f"HloModule m\n{MORE_CALLEES}\nENTRY main {{\n  {params}\n  ROOT r = {placeholder} {op}\n}}\n"
    module = hloref.parse(text)
    root = module.entry.root
    called = _Verifier(module, True).resolve_called(module.entry, root)
    inferred = infer_shape(root.opcode, [o.shape for o in root.operands], root.attrs, called,
                           declared=root.shape)
    text = text.replace(f"ROOT r = {placeholder}", f"ROOT r = {shape_str(inferred)}")
    ok, why = xla_accepts(text)
    assert ok, f"XLA rejects hloref's inferred {shape_str(inferred)}:\n{text}\n{why}"
    assert verify_text(text) == []


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


# --------------------------------------------------------------------------- XLA's accepted forms

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
