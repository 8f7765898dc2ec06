"""Differential testing against XLA: verdicts, isolation, pass blame, reduction.

Planted differences (a hand-edited copy of a module, an edited pass snapshot) must be
flagged and localised to the right instruction or pass; correct modules must give no
mismatch; XLA dying in a worker must be a crash verdict, not our death.
"""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import hloref
from hloref.cli import main
from hloref.inputs import random_value

pytest.importorskip("jax")

from hloref.fuzz import diff  # noqa: E402
from hloref.fuzz.blame import evaluate_snapshots, first_divergent, read_dump  # noqa: E402
from hloref.fuzz.workers import OracleWorker  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MLP = (ROOT / "examples" / "mlp.hlo").read_text()
MLP_BAD = MLP.replace("ROOT max.3 = f32[2,16]{1,0} maximum(", "ROOT max.3 = f32[2,16]{1,0} minimum(")


@pytest.fixture(scope="module")
def worker():
    w = OracleWorker("xla", timeout=120)
    yield w
    w.close()


@pytest.fixture(scope="module")
def tf_worker():
    pytest.importorskip("tensorflow")
    w = OracleWorker("tf", timeout=180)
    yield w
    w.close()


def _args(module, seed=0):
    rng = np.random.default_rng(seed)
    return [random_value(p.shape, rng) for p in module.entry.parameters]


def test_worker_abort_is_a_crash_verdict_and_the_worker_recovers(worker):
    result = worker.abort_for_test()
    assert result.kind == "crash"
    assert result.signal == "SIGABRT"
    assert "worker told to abort" in result.stderr_tail
    module = hloref.parse(MLP)
    again = worker.run(MLP, _args(module))
    assert again.ok and again.value.shape == (2, 4)


def test_worker_timeout_verdict(worker):
    result = worker.hang_for_test(30, timeout=1)
    assert result.kind == "timeout"
    assert worker.run("HloModule m\nENTRY e {\n  ROOT c = s32[] constant(7)\n}\n", []).value == 7


def test_xla_rejection_is_an_error_verdict_not_a_crash(worker):
    result = worker.run("HloModule m\nENTRY e {\n  ROOT c = f32[] constant(1\n}\n", [])
    assert result.kind == "error" and "parse" in result.message


def test_planted_difference_is_flagged_and_localised(worker):
    assert MLP_BAD != MLP
    module = hloref.parse(MLP)
    report = diff(module, _args(module), worker=worker, oracle_module=MLP_BAD)
    assert report.verdict == "mismatch"
    culprit = report.culprit.innermost()
    assert (culprit.computation, culprit.name, culprit.opcode) == ("relu.1", "max.3", "maximum")
    # hloref's value is the relu by hand: max(x, 0) of the same operand values
    x = culprit.operands[0]
    np.testing.assert_array_equal(culprit.expected, np.maximum(x, 0))


def test_examples_have_no_mismatch(worker):
    for path in sorted((ROOT / "examples").glob("*.hlo")):
        module = hloref.parse(path.read_text())
        for seed in range(2):
            report = diff(module, _args(module, seed), worker=worker)
            assert report.verdict == "match", f"{path.name} seed {seed}: {report.summary()}"


def _jax_programs():
    import jax
    import jax.numpy as jnp
    import ml_dtypes
    rng = np.random.default_rng(0)

    def f32(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    programs = [
        ("attention", lambda q, k, v: jax.nn.softmax(q @ k.T / 4.0) @ v, (f32(8, 16), f32(8, 16), f32(8, 16))),
        ("layernorm", lambda x: (x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5),
         (f32(4, 32),)),
        ("bf16_mlp", lambda x, w: jnp.tanh(x @ w).astype(jnp.bfloat16),
         (f32(4, 8).astype(ml_dtypes.bfloat16), f32(8, 8).astype(ml_dtypes.bfloat16))),
        ("f16_gelu", lambda x: jax.nn.gelu(x), (f32(64).astype(np.float16),)),
        ("fp8_dot", lambda a, b: jax.lax.dot(a, b, preferred_element_type=jnp.float32),
         (f32(4, 8).astype(ml_dtypes.float8_e4m3fn), f32(8, 4).astype(ml_dtypes.float8_e5m2))),
        ("int_ops", lambda a, b: (a * b + (a >> 2)) % 7, (rng.integers(-100, 100, 32).astype(np.int32),
                                                           rng.integers(1, 50, 32).astype(np.int32))),
        ("cumsum_loop", lambda x: jax.lax.fori_loop(0, 5, lambda i, c: c * 0.5 + x, x), (f32(16),)),
        ("logsumexp", lambda x: jax.nn.logsumexp(x, axis=0), (f32(10, 6),)),
    ]
    out = []
    for name, fn, args in programs:
        text = jax.jit(fn).lower(*args).as_text(dialect="hlo")
        out.append((name, text, text, args))
        # XLA cannot recompile its own optimized output (fusions lack backend configs):
        # hloref evaluates the optimized module, XLA the module it came from.
        optimized = jax.jit(fn).lower(*args).compile().as_text()
        out.append((name + "_optimized", optimized, text, args))
    return out


def test_jax_programs_have_no_false_mismatch(worker):
    """Correct modules (lowered and XLA-optimized) from JAX: no mismatch verdicts."""
    for name, text, oracle_text, args in _jax_programs():
        module = hloref.parse(text)
        report = diff(module, list(args), worker=worker, oracle_module=oracle_text)
        assert report.verdict == "match", f"{name}: {report.summary()}"


def test_check_command_names_the_instruction(tmp_path, capsys):
    (tmp_path / "before.hlo").write_text(MLP)
    (tmp_path / "after.hlo").write_text(MLP_BAD)
    code = main(["check", str(tmp_path / "before.hlo"), str(tmp_path / "after.hlo"), "--seed", "1"])
    out = capsys.readouterr().out
    assert code == 1
    assert "%jit_relu_.1 (call)" in out
    assert main(["check", str(tmp_path / "before.hlo"), str(tmp_path / "before.hlo")]) == 0


def test_check_dump_finds_the_planted_pass(tmp_path, worker, capsys):
    """A dump whose snapshots from 'fusion' on are edited is blamed on 'fusion'."""
    dump = tmp_path / "dump"
    module = hloref.parse(MLP)
    result = worker.run(MLP, _args(module), debug_options={"xla_dump_to": str(dump),
                                                           "xla_dump_hlo_pass_re": ".*"})
    assert result.ok
    modules = read_dump(str(dump))
    (dm,) = [m for m in modules.values() if m.before and m.snapshots]
    # the untouched dump: every snapshot agrees with the module before optimizations
    _, results = evaluate_snapshots(dm, _args(module))
    assert all(r.status == "ok" for r in results), [r.message for r in results]
    assert first_divergent(results) is None
    target = next(i for i, s in enumerate(dm.snapshots) if s.pass_name == "fusion")
    for s in dm.snapshots[target:] + []:
        text = Path(s.path).read_text()
        edited = text.replace("maximum(", "minimum(")
        assert edited != text
        Path(s.path).write_text(edited)
    if dm.after:
        Path(dm.after).write_text(Path(dm.after).read_text().replace("maximum(", "minimum("))
    _, results = evaluate_snapshots(dm, _args(module))
    bad = first_divergent(results)
    assert bad is not None and bad.label.endswith("after fusion")
    code = main(["check-dump", str(dump), "--json", str(tmp_path / "out.json")])
    out = capsys.readouterr().out
    assert code == 1 and "after fusion **first divergence**" in out


def test_reduction_of_a_planted_difference():
    """A planted wrong answer (the oracle runs an edited module) is reduced to a
    one-instruction reproducer with the reference value."""
    from hloref.fuzz.reduce import reduce_failure

    module = hloref.parse(MLP)
    args = _args(module)
    with OracleWorker("xla") as w:
        def fails(m, a):
            # the planted bug: XLA computes minimum where the module says maximum
            bad_text = m.to_text().replace(" maximum(", " minimum(")
            r = diff(m, a, worker=w, oracle_module=bad_text)
            return r.verdict == "mismatch" and r.culprit is not None and \
                r.culprit.innermost().opcode == "maximum"

        small, small_args = reduce_failure(module, args, fails)
    opcodes = sorted({i.opcode for c in small.computations.values() for i in c.instructions})
    assert len(small.entry.instructions) <= 4, small.to_text()
    assert "maximum" in opcodes


def test_diff_cli_match_and_json(capsys):
    code = main(["diff", str(ROOT / "examples" / "while_loop.hlo"), "--json"])
    out = capsys.readouterr().out
    assert code == 0 and '"verdict": "match"' in out


def test_diff_cli_bad_input(tmp_path, capsys):
    (tmp_path / "bad.hlo").write_text("HloModule m\nENTRY e {\n  ROOT x = f32[2 parameter(0)\n}\n")
    code = main(["diff", str(tmp_path / "bad.hlo")])
    assert code == 2 and "bad.hlo:3:" in capsys.readouterr().err



# ---------------------------------------------------------------- expander / formula bounds

BN_INFERENCE = """HloModule m
ENTRY e {
  x = f32[1,4,3] parameter(0)
  s = f32[3] parameter(1)
  o = f32[3] parameter(2)
  v = f32[3] parameter(3)
  ROOT y = f32[1,4,3] batch-norm-inference(x, s, o, o, v), epsilon=0.5, feature_index=2
}
"""


def test_batch_norm_expansion_cancellation_is_not_a_mismatch(worker):
    # XLA computes x*ts + (offset - mean*ts): with x == mean = 2.5e18 and |ts| ~ 3e18 the
    # two products cancel in f32 and the result is off by ~1e29 (camp10 finding)
    x = np.full((1, 4, 3), 2.526497e18, np.float32)
    s = np.array([-4.2466855e18, -8.4675441e18, -8.9184912e18], np.float32)
    o = np.array([2.526497e18, -8.467544e18, 2.526497e18], np.float32)
    v = np.array([1.1232744, 0.541326, 2.8250308], np.float32)
    report = diff(BN_INFERENCE, [x, s, o, v], worker=worker)
    assert report.verdict == "match", report.summary()
    # a planted difference on well-conditioned data is still flagged
    x2 = np.random.default_rng(0).standard_normal((1, 4, 3)).astype(np.float32)
    o2, v2 = np.zeros(3, np.float32), np.ones(3, np.float32)
    s2 = np.ones(3, np.float32)
    bad = BN_INFERENCE.replace("batch-norm-inference(x, s, o, o, v)",
                               "batch-norm-inference(x, s, o, o, o)")  # variance 0, not 1
    report = diff(BN_INFERENCE, [x2, s2, o2, v2], worker=worker, oracle_module=bad)
    assert report.verdict == "mismatch", report.summary()


def test_batch_norm_training_f16_lost_variance_and_planted(worker):
    text = """HloModule m
ENTRY e {
  x = f16[3,2,1] parameter(0)
  p = f16[3] parameter(1)
  ROOT t = (f16[3,2,1], f16[3], f16[3]) batch-norm-training(x, p, p), epsilon=0.001, feature_index=0
}
"""
    x = np.array([[[-1.09], [-1.141]], [[-1.864], [0.967]], [[-0.2134], [0.849]]], np.float16)
    p = np.array([-0.2231, 2.346, 0.3743], np.float16)
    assert diff(text, [x, p], worker=worker).verdict == "match"
    bad = text.replace("epsilon=0.001", "epsilon=0.25")
    assert diff(text, [x, p], worker=worker, oracle_module=bad).verdict == "mismatch"


def test_triangular_and_cholesky_bounds_and_planted(worker):
    from hloref.fuzz.error_bounds import cholesky_atol, triangular_solve_atol
    from hloref.types import from_dtype
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 4)) + 4 * np.eye(4)
    x = rng.standard_normal((4, 2))
    b = np.tril(a) @ x
    bound = triangular_solve_atol(a, x, left_side=True, lower=True, unit_diagonal=False,
                                  transpose_a="NO_TRANSPOSE", et=from_dtype(np.float64))
    assert np.all(bound < 1e-13) and np.all(bound > 0)  # tight: n·u·cond, not a blanket
    spd = a @ a.T
    L = np.linalg.cholesky(spd)
    cb = cholesky_atol(spd, L, lower=True, et=from_dtype(np.float64))
    assert np.all(cb[np.tril_indices(4)] < 1e-12)
    text = """HloModule m
ENTRY e {
  a = f64[4,4] parameter(0)
  b = f64[4,2] parameter(1)
  ROOT x = f64[4,2] triangular-solve(a, b), left_side=true, lower=true, transpose_a=NO_TRANSPOSE
}
"""
    assert diff(text, [a, b], worker=worker).verdict == "match"
    bad = text.replace("lower=true", "lower=true, unit_diagonal=true")
    assert diff(text, [a, b], worker=worker, oracle_module=bad).verdict == "mismatch"


def test_complex_formula_budget_and_planted(worker):
    text = "HloModule m\nENTRY e {\n p = c64[1] parameter(0)\n ROOT r = c64[1] sine(p)\n}\n"
    z = np.array([-0.020676358 + 0.005808184j], np.complex64)  # XLA: sinh cancellation
    assert diff(text, [z], worker=worker).verdict == "match"
    bad = text.replace("sine(p)", "cosine(p)")
    assert diff(text, [z], worker=worker, oracle_module=bad).verdict == "mismatch"
    e = "HloModule m\nENTRY e {\n p = c64[1] parameter(0)\n ROOT r = c64[1] exponential-minus-one(p)\n}\n"
    out = hloref.evaluate(e, np.array([9.05279e8 + 0j], np.complex64))
    assert np.isinf(out.real[0]) and out.imag[0] == 0  # C99 G.6.3.1: exp(+inf + i0) = inf + i0


def test_conv_padding_with_inf_kernel_is_a_known_gap(worker):
    text = """HloModule m
ENTRY e {
  a = f32[1,4,1] parameter(0)
  k = f32[1,1,1] parameter(1)
  ROOT c = f32[1,3,1] convolution(a, k), window={size=1 stride=2 pad=1_0}, dim_labels=b0f_0io->b0f
}
"""
    a = np.ones((1, 4, 1), np.float32)
    k = np.full((1, 1, 1), np.inf, np.float32)
    report = diff(text, [a, k], worker=worker)  # spec: 0 * inf = NaN; XLA skips the pad tap
    assert report.verdict == "known-gap" and report.known_gap == "conv-padding-nonfinite"
    report = diff(text, [a, np.full((1, 1, 1), 2.0, np.float32)], worker=worker,
                  oracle_module=text.replace("pad=1_0", "pad=0_1"))
    assert report.verdict == "mismatch"


def test_batch_norm_with_infinite_parameters_is_a_known_gap(worker):
    # found by a campaign (seed 11): mean = scale = offset = -inf, variance 1.46
    text = """HloModule m
ENTRY e {
  x = f32[1,3] parameter(0)
  v = f32[1] parameter(1)
  p = f32[1] parameter(2)
  ROOT b = f32[1,3] batch-norm-inference(x, p, p, p, v), epsilon=0.001, feature_index=0
}
"""
    x = np.array([[-0.007592494, 0.23368078, 0.5786753]], np.float32)
    v, p = np.array([1.4592637], np.float32), np.array([-np.inf], np.float32)
    # the documented formula by hand: (x + inf) * (-inf / sqrt(1.4602637)) - inf = -inf
    np.testing.assert_array_equal(hloref.evaluate(text, x, v, p), np.full((1, 3), -np.inf))
    report = diff(text, [x, v, p], worker=worker)  # XLA: inf - inf = NaN at x < 0
    assert report.verdict == "known-gap" and report.known_gap == "batch-norm-rearranged"
    finite = np.array([0.5], np.float32)
    assert diff(text, [x, v, finite], worker=worker).verdict == "match"


def test_tuple_root_difference_within_the_producers_bound_is_rounding(worker):
    # found by a campaign (seed 11): XLA compiles the solve differently when it feeds a
    # tuple; X[:, 1:, 0] are exact zeros (B is A's first columns) and XLA's 1e-8 values
    # are within triangular-solve's error bound, which the tuple root must inherit
    text = """HloModule m
ENTRY e {
  a = f32[2,3,3] parameter(0)
  b = f32[2,3,2] parameter(1)
  s = f8e8m0fnu[3] parameter(2)
  t = f32[2,3,2] triangular-solve(a, b), left_side=true, lower=true, unit_diagonal=false, transpose_a=NO_TRANSPOSE
  ROOT r = (f8e8m0fnu[3], f32[2,3,2]) tuple(s, t)
}
"""
    a = np.array([[[2.3210129737854004, 0.29576802253723145, -0.4713149964809418],
                   [0.06681700050830841, 1.8769675493240356, -0.0666220411658287],
                   [-0.09559641778469086, 0.4451749920845032, -2.1822383403778076]],
                  [[-2.019951105117798, 0.26827576756477356, -0.4121306240558624],
                   [0.28481385111808777, 1.8198453187942505, -0.2928304970264435],
                   [-0.3068871796131134, -0.0696895495057106, -2.277127265930176]]], np.float32)
    b = np.ascontiguousarray(a[:, :, :2])
    s = np.full(3, 255, np.uint8).view(ml_dtypes.float8_e8m0fnu)
    report = diff(text, [a, b, s], worker=worker)
    assert report.verdict == "match", report
    # the same module with the solve perturbed far beyond its bound still mismatches
    bad = text.replace("ROOT r = (f8e8m0fnu[3], f32[2,3,2]) tuple(s, t)",
                       "n = f32[2,3,2] negate(t)\n  ROOT r = (f8e8m0fnu[3], f32[2,3,2]) tuple(s, n)")
    assert diff(text, [a, b, s], worker=worker, oracle_module=bad).verdict == "mismatch"


def test_bounds_for_some_leaves_only():
    # a variadic reduce (value, index): the accumulation bound exists for the float leaf
    # only; the integer leaf compares exactly (a campaign hit KeyError (0,) here)
    from hloref.fuzz.compare import compare_values
    ours = (np.array([1.0, 2.0], np.float32), np.array([3, 4], np.int32))
    bound = {(0,): np.full(2, 0.5)}
    assert compare_values((ours[0] + np.float32(0.25), ours[1]), ours, opcode="reduce",
                          atol=bound).ok
    assert not compare_values((ours[0], ours[1] + 1), ours, opcode="reduce", atol=bound).ok
    assert compare_values(ours, ours, opcode="reduce", atol={(1,): np.zeros(2)}).ok



def test_batch_norm_rearranged_overflow_is_a_known_gap(worker):
    # found by a campaign (seed 12): x = mean = -3.08e27, so x - mean = 0 and the
    # documented formula gives the offset; XLA's x * (scale * inv) overflows f32
    text = """HloModule m
ENTRY e {
  x = f32[1,2] parameter(0)
  v = f32[1] parameter(1)
  p = f32[1] parameter(2)
  ROOT b = f32[1,2] batch-norm-inference(x, p, p, p, v), epsilon=0.5, feature_index=0
}
"""
    x = np.array([[-3.0822045e27, 1.0]], np.float32)
    v, p = np.array([2.337741], np.float32), np.array([-3.0822045e27], np.float32)
    out = hloref.evaluate(text, x, v, p)
    assert out[0, 0] == p[0]  # 0 * scale / sqrt(v + eps) + offset, by hand
    report = diff(text, [x, v, p], worker=worker)
    assert report.verdict == "known-gap" and report.known_gap == "batch-norm-rearranged"


def test_complex_power_on_the_branch_cut_is_inside_the_envelope(worker):
    # found by a campaign (seed 12): XLA's cos(4 + 0i) has imaginary part -0 (C99 and
    # numpy: +0), and power(z, z) at a negative real z picks its side of the cut by it.
    # cos's error budget is normwise, so the imaginary part may be a tiny value of
    # either sign: the envelope's samples land on both sides of the cut (formerly the
    # known gap complex-branch-cut-signed-zero)
    text = """HloModule m
ENTRY e {
  x = c128[2] parameter(0)
  c = c128[2] cosine(x)
  ROOT p = c128[2] power(c, c)
}
"""
    x = np.array([4 + 0j, 6 + 0j])
    z = np.cos(4 + 0j)  # -0.6536 + 0i
    expected0 = np.exp(z * (np.log(-z.real) + 1j * np.pi))  # principal log: arg = +pi
    np.testing.assert_allclose(hloref.evaluate(text, x)[0], expected0, rtol=1e-14)
    report = diff(text, [x], worker=worker)
    assert report.verdict == "match", report.summary()
    assert report.comparison is not None and not report.comparison.ok  # XLA took the other side
    off_cut = np.array([4 + 0.5j, 6 + 0j])  # cos(4 + 0.5i) is off the real axis
    assert diff(text, [off_cut], worker=worker).verdict == "match"
    # the other side of the cut where cos is far from the real axis is flagged
    wrong = np.conj(hloref.evaluate(text, off_cut))
    assert diff(text, [off_cut], worker=worker, oracle_value=wrong).verdict == "mismatch"


def test_narrow_rounding_carried_by_a_widening_convert(tf_worker):
    # found by a campaign (seed 12, tf oracle): TF's f8e4m3 asinh(0.625) is 0.625 (1 ULP
    # from the correctly rounded 0.5625; asinh(0.625) = 0.5901), within asinh's budget
    # in isolation; negate and convert to f16 carry that exactly, so it is rounding
    text = """HloModule m
ENTRY e {
  p = f8e4m3[1,2] parameter(0)
  a = f8e4m3[1,2] asinh(p)
  n = f8e4m3[1,2] negate(a)
  ROOT c = f16[1,2] convert(n)
}
"""
    x = np.array([[0.625, -0.875]], ml_dtypes.float8_e4m3)
    assert hloref.evaluate(text, x).astype(np.float32).tolist() == [[-0.5625, 0.8125]]
    assert diff(text, [x], worker=tf_worker, oracle="tf").verdict == "match"


def test_dropped_narrow_rounding_is_excess_precision(worker):
    # jaxlib's XLA fuses asinh with the convert and drops the f8 rounding: 0.5903 is not
    # an f8e4m3 value. Under XLA's default contract (xla_allow_excess_precision=true) an
    # intermediate rounding may be skipped, so that is inside the envelope; with excess
    # precision disabled XLA rounds to f8 (0.5625, -0.8125, checked here on XLA), and a
    # value off the f8 grid is then a mismatch.
    text = """HloModule m
ENTRY e {
  p = f8e4m3[1,2] parameter(0)
  a = f8e4m3[1,2] asinh(p)
  ROOT c = f16[1,2] convert(a)
}
"""
    x = np.array([[0.625, -0.875]], ml_dtypes.float8_e4m3)
    default = diff(text, [x], worker=worker)
    assert default.verdict == "match", default.summary()
    assert not default.comparison.ok  # XLA did skip the rounding: 0.5903
    dropped = np.asarray(default.actual)
    assert abs(float(dropped[0, 0]) - 0.5903) < 1e-3
    strict = {"xla_allow_excess_precision": False}
    report = diff(text, [x], worker=worker, debug_options=strict)
    assert report.verdict == "match", report.summary()
    assert np.asarray(report.actual).astype(np.float32).tolist() == [[0.5625, -0.8125]]
    report = diff(text, [x], worker=worker, debug_options=strict, oracle_value=dropped)
    assert report.verdict == "mismatch" and "not a value of f8e4m3" in report.summary()


def test_tf_sinh_accuracy_is_a_known_gap(tf_worker):
    # found by a campaign (seed 14): TF's f32 sinh(-49) is 19 ULP off (exp(|x| - log 2))
    text = "HloModule m\nENTRY e {\n  x = f32[1] parameter(0)\n  ROOT s = f32[1] sinh(x)\n}\n"
    x = np.array([-49.0], np.float32)
    np.testing.assert_array_equal(hloref.evaluate(text, x), np.sinh(x.astype(np.float64)).astype(np.float32))
    report = diff(text, [x], worker=tf_worker, oracle="tf")
    assert report.verdict == "known-gap" and report.known_gap == "tf-transcendental-accuracy"


def test_a_known_xla_difference_stays_a_mismatch_and_is_named(worker):
    # popcnt of s4 -8 (0b1000): one bit set (§PopulationCount); XLA:CPU counts the 8 bits
    # of the sign-extended storage byte (5). Still a mismatch (XLA is wrong), named as
    # the catalogued difference so a campaign does not report it again.
    text = """HloModule m
ENTRY e {
  x = s4[3] parameter(0)
  ROOT p = s4[3] popcnt(x)
}
"""
    x = np.array([-8, -1, 3], dtype=ml_dtypes.int4)
    report = diff(text, [x], worker=worker)
    assert np.asarray(report.expected).astype(int).tolist() == [1, 4, 2]
    assert report.verdict == "mismatch"
    assert report.known_difference == "popcnt-s4", report.summary()
    assert "a known XLA:CPU difference (popcnt-s4)" in report.summary()


_F4_BRANCHES = """HloModule m

keep {{
  p = f4e2m1fn[4] parameter(0)
  ROOT c = s64[4] convert(p)
}}

saturate {{
  p = f4e2m1fn[4] parameter(0)
  n = f4e2m1fn[4] negate(p)
  ROOT c = s64[4] convert(n)
}}

ENTRY e {{
  s = {sel} parameter(0)
  x = f4e2m1fn[4] parameter(1)
  ROOT r = s64[4] conditional(s, x, x), {branches}
}}
"""


@pytest.mark.parametrize("sel,branches,value,inner", [
    ("s32[]", "branch_computations={keep, saturate}", 1, "saturate"),
    ("s32[]", "branch_computations={saturate, keep}", 7, "keep"),     # out of range: the last
    ("pred[]", "true_computation=saturate, false_computation=keep", False, "keep"),
])
def test_localisation_opens_the_branch_a_conditional_ran(worker, sel, branches, value, inner):
    """A conditional whose branch converts f4e2m1fn ±6 to s64 (the filed convert-f4e2m1fn-
    to-int-saturates: XLA:CPU gives the s64 extremes, by hand 6 and -6): the culprit is
    that branch's convert, found by opening the branch the selector chose, and so the
    mismatch is named as the filed class."""
    text = _F4_BRANCHES.format(sel=sel, branches=branches)
    selector = np.array(value, np.bool_ if sel == "pred[]" else np.int32)
    x = np.array([6, -6, 1.5, 0], ml_dtypes.float4_e2m1fn)
    report = diff(text, [selector, x], worker=worker)
    want = [6, -6, 1, 0] if inner == "keep" else [-6, 6, -1, 0]
    assert np.asarray(report.expected).tolist() == want
    assert report.verdict == "mismatch"
    culprit = report.culprit.innermost()
    assert (culprit.computation, culprit.opcode) == (inner, "convert"), report.summary()
    assert report.known_difference == "convert-f4e2m1fn-to-int-saturates"


def test_a_crash_report_keeps_the_line_that_says_why_above_a_long_stack(tmp_path):
    """XLA's failed CHECK prints one line and then a stack trace of 25 or more frames;
    the report's 20-line tail used to keep only frames (a campaign, seed 53: the
    algebraic simplifier's 'Window dimensions do not match RHS shape' was lost). The
    cause line is now put first; a short stderr is kept as it is."""
    check = ("F1128 12:06:51.842400 12573 algebraic_simplifier.cc:586] Check failed: "
             "computation->Accept(this) is OK (INVALID_ARGUMENT: Window dimensions do not "
             "match RHS shape:")
    frames = [f"    @     0x7f73{i:08x}  frame{i}()" for i in range(30)]
    path = tmp_path / "stderr"
    path.write_text("\n".join(["noise", check, "\tRHS shape: f32[2,1,4,3]"] + frames) + "\n")
    w = object.__new__(OracleWorker)
    w._stderr_path = str(path)
    tail = w._stderr_tail().splitlines()
    assert tail[0] == check and tail[1] == "..." and tail[2:] == frames[-20:]
    path.write_text("\n".join(["noise", check] + frames[:3]) + "\n")
    assert w._stderr_tail().splitlines() == ["noise", check] + frames[:3]


_F4_LOOP = """HloModule m

cond {
  p = (s32[], f4e2m1fn[3], s64[3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(4)
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  p = (s32[], f4e2m1fn[3], s64[3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f4e2m1fn[3] get-tuple-element(p), index=1
  acc = s64[3] get-tuple-element(p), index=2
  k = s32[] constant(%d)
  at = pred[] compare(i, k), direction=EQ
  atb = pred[3] broadcast(at), dimensions={}
  c = s64[3] convert(x)
  zero = s64[3] constant({0, 0, 0})
  v = s64[3] select(atb, c, zero)
  acc2 = s64[3] add(acc, v)
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT t = (s32[], f4e2m1fn[3], s64[3]) tuple(i2, x, acc2)
}

ENTRY e {
  x = f4e2m1fn[3] parameter(0)
  z = s32[] constant(0)
  acc = s64[3] constant({0, 0, 0})
  init = (s32[], f4e2m1fn[3], s64[3]) tuple(z, x, acc)
  w = (s32[], f4e2m1fn[3], s64[3]) while(init), condition=cond, body=body
  ROOT r = s64[3] get-tuple-element(w), index=2
}
"""


@pytest.mark.parametrize("iteration", [0, 2])
def test_localisation_opens_a_loop_at_the_first_iteration_xla_computes_differently(
        worker, iteration):
    """A loop whose body adds f4e2m1fn ±6 converted to s64 at one iteration only (the filed
    convert-f4e2m1fn-to-int-saturates: by hand 6 and -6, XLA:CPU the s64 extremes), zeros
    at the others: the culprit is the body's convert at that iteration, found by stepping
    the loop on the oracle from hloref's state, and the mismatch is named as the filed
    class (before, the culprit was the whole while and the class went unnamed)."""
    x = np.array([6, -6, 1.5], ml_dtypes.float4_e2m1fn)
    report = diff(_F4_LOOP % iteration, [x], worker=worker)
    assert np.asarray(report.expected).tolist() == [6, -6, 1]
    assert report.verdict == "mismatch"
    culprit = report.culprit.innermost()
    assert (culprit.computation, culprit.name) == ("body", "c"), report.summary()
    assert f"iteration {iteration} of %w, in its body %body" in report.summary()
    assert report.known_difference == "convert-f4e2m1fn-to-int-saturates"


def test_an_instruction_that_crashes_the_oracle_alone_is_not_the_culprit(worker):
    """A campaign's program (seed 67): a u2 concatenate (which XLA:CPU aborts on when it
    is compiled alone: the filed concatenate-s2-aborts) feeds a u2 sort that XLA gets
    wrong (the filed sort-2bit: [0, 1, 2, 3, 2, 3] sorted is [0, 1, 2, 2, 3, 3] by hand,
    element 4 is 3). The whole module runs, so the concatenate's crash alone says
    nothing of the wrong value: the sort is the culprit."""
    text = """HloModule m

cmp {
  a = u2[] parameter(0)
  b = u2[] parameter(1)
  ROOT lt = pred[] compare(a, b), direction=LT
}

ENTRY e {
  p = s64[] parameter(0)
  i = u2[4] iota(), iota_dimension=0
  s = u2[2] slice(i), slice={[2:4]}
  c = u2[6] concatenate(i, s), dimensions={0}
  srt = u2[6] sort(c), dimensions={0}, is_stable=true, to_apply=cmp
  w = s64[6] convert(srt)
  e4 = s64[1] slice(w), slice={[4:5]}
  r = s64[] reshape(e4)
  ROOT out = s64[] add(r, p)
}
"""
    report = diff(text, [np.array(0, np.int64)], worker=worker)
    assert int(np.asarray(report.expected)) == 3
    assert report.verdict == "mismatch", report.summary()
    culprit = report.culprit.innermost()
    assert culprit.opcode == "sort", report.summary()
    assert report.known_difference == "sort-2bit"


def test_localisation_opens_a_map_at_the_first_element_xla_computes_differently(worker):
    """A campaign's program (seed 71): a map whose computation converts u32 to f4e2m1fn,
    squares it and converts back. By hand, 338720930 converts to f4e2m1fn's largest 6,
    6 * 6 = 36 saturates to 6, and 6 converts to 6; XLA:CPU gives u32's largest (the filed
    convert-f4e2m1fn-to-int-saturates). The culprit is the computation's last convert,
    found by opening the map at its first differing element, so the class is named."""
    text = """HloModule m

mapper {
  p = u32[] parameter(0)
  f = f4e2m1fn[] convert(p)
  sq = f4e2m1fn[] multiply(f, f)
  ROOT back = u32[] convert(sq)
}

ENTRY e {
  x = u32[3] parameter(0)
  ROOT m = u32[3] map(x), dimensions={0}, to_apply=mapper
}
"""
    x = np.array([0, 1, 338720930], np.uint32)
    report = diff(text, [x], worker=worker)
    assert np.asarray(report.expected).tolist() == [0, 1, 6]
    assert report.verdict == "mismatch", report.summary()
    culprit = report.culprit.innermost()
    assert (culprit.computation, culprit.name) == ("mapper", "back"), report.summary()
    assert report.known_difference == "convert-f4e2m1fn-to-int-saturates"
