"""rng-bit-generator (bit-exact with XLA:CPU), rng (hloref's own stream: support, moments,
determinism) and rng-get-and-update-state (hloref.evaluator.rng)."""

from __future__ import annotations

import ml_dtypes  # noqa: F401
import numpy as np
import pytest

pytest.importorskip("jax")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import hloref  # noqa: E402
from hloref.evaluator.interpreter import Interpreter  # noqa: E402
from hloref.evaluator.rng import philox4x32, threefry2x32  # noqa: E402
from hloref.fuzz.compare import compare_values  # noqa: E402
from hloref.fuzz.oracles.xla import compile_hlo, run_hlo  # noqa: E402

SETTINGS = settings(max_examples=30, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


def module(body: str, name: str = "m") -> str:
    return f"HloModule {name}\n\nENTRY main {{\n{body}\n}}\n"


def bits_of(x: np.ndarray) -> np.ndarray:
    return x.view(np.dtype(f"u{x.dtype.itemsize}"))


def assert_bit_exact(xla, ours):
    assert len(xla) == len(ours) == 2
    np.testing.assert_array_equal(ours[0], xla[0])
    assert ours[0].dtype == xla[0].dtype
    assert ours[1].dtype == xla[1].dtype and ours[1].shape == xla[1].shape
    np.testing.assert_array_equal(bits_of(ours[1]), bits_of(xla[1]))


# ---------------------------------------------------------------------------
# Kernels against the Random123 known-answer vectors (kat_vectors)
# ---------------------------------------------------------------------------

def test_threefry2x32_known_answers():
    cases = [((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
             ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
             ((0x243F6A88, 0x85A308D3), (0x13198A2E, 0x03707344), (0xC4923A9C, 0x483DF7A0))]
    for ctr, key, want in cases:
        x0, x1 = threefry2x32(np.array([ctr[0] | ctr[1] << 32], np.uint64),
                              key[0] | key[1] << 32)
        assert (int(x0[0]), int(x1[0])) == want


def test_philox4x32_known_answers():
    cases = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
             ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6,
                                                      0x6D5451FD)),
             ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
              (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]
    for ctr, key, want in cases:
        out = philox4x32(np.array([ctr[0] | ctr[1] << 32], np.uint64),
                         np.array([ctr[2] | ctr[3] << 32], np.uint64), key[0] | key[1] << 32)
        assert tuple(int(v) for v in out[0]) == want


# ---------------------------------------------------------------------------
# rng-bit-generator against XLA:CPU
# ---------------------------------------------------------------------------

TYPES = ["u32", "s32", "u64", "s64", "u16", "s16", "u8", "s8", "u4", "s4", "u2", "s2",
         "f32", "f64", "f16", "bf16", "f8e4m3fn"]
ALGS = ["rng_default", "rng_three_fry", "rng_philox"]


@st.composite
def rbg_case(draw):
    alg = draw(st.sampled_from(ALGS))
    k = 2 if alg == "rng_three_fry" else draw(st.sampled_from([2, 3]))
    t = draw(st.sampled_from(TYPES))
    dims = tuple(draw(st.lists(st.integers(1, 8), min_size=0, max_size=3)))
    words = draw(st.lists(st.one_of(st.integers(0, 2**64 - 1),
                                    st.sampled_from([0, 1, 2**32 - 1, 2**64 - 1, 2**64 - 2])),
                          min_size=k, max_size=k))
    return alg, t, dims, np.array(words, np.uint64)


@SETTINGS
@given(case=rbg_case())
def test_rng_bit_generator_bit_exact(case):
    alg, t, dims, state = case
    k = state.size
    d = ",".join(map(str, dims))
    text = module(f"  s = u64[{k}] parameter(0)\n"
                  f"  ROOT r = (u64[{k}], {t}[{d}]) rng-bit-generator(s), algorithm={alg}")
    assert_bit_exact(run_hlo(text, state), hloref.evaluate(text, state))


@pytest.mark.parametrize("dims", ["[]", "[0]", "[3,0,2]", "[9,7]", "[1,1,5]", "[2,3,7,5]"])
def test_rng_bit_generator_shapes(dims):
    # one module: every algorithm x a 64-, 32- and 8-bit result
    state = np.array([0x0123456789ABCDEF, 2**64 - 3], np.uint64)
    lines, names, shapes = ["  s = u64[2] parameter(0)"], [], []
    for i, alg in enumerate(ALGS):
        for t in ("u32", "u64", "s8"):
            lines.append(f"  r{i}{t} = (u64[2], {t}{dims}) rng-bit-generator(s), algorithm={alg}")
            names.append(f"r{i}{t}")
            shapes.append(f"(u64[2], {t}{dims})")
    lines.append(f"  ROOT out = ({', '.join(shapes)}) tuple({', '.join(names)})")
    text = module("\n".join(lines))
    xla, ours = run_hlo(text, state), hloref.evaluate(text, state)
    for x, o in zip(xla, ours):
        assert_bit_exact(x, o)


def test_philox_128_bit_counter_carry():
    # u64[3] state: the counter's low word wraps into the high word mid-stream
    for lo, hi in [(2**64 - 2, 5), (2**64 - 1, 2**64 - 1)]:
        state = np.array([77, lo, hi], np.uint64)
        for t in ("u32[5,3]", "u64[7]"):
            text = module(f"  s = u64[3] parameter(0)\n"
                          f"  ROOT r = (u64[3], {t}) rng-bit-generator(s), algorithm=rng_philox")
            assert_bit_exact(run_hlo(text, state), hloref.evaluate(text, state))


def test_rng_bit_generator_lowered_by_jax():
    import jax
    import jax.numpy as jnp
    cases = [
        (lambda s: jax.lax.rng_bit_generator(s, (3, 5), jnp.uint32,
                                             algorithm=jax.lax.RandomAlgorithm.RNG_PHILOX),
         np.array([1, 2], np.uint64)),
        (lambda s: jax.lax.rng_bit_generator(s, (4, 3), jnp.uint8,
                                             algorithm=jax.lax.RandomAlgorithm.RNG_THREE_FRY),
         np.array([5, 6, 7, 8], np.uint32)),
        (lambda s: jax.lax.rng_bit_generator(s, (6,), jnp.uint16), np.array([9, 10], np.uint64)),
    ]
    with jax.enable_x64(True):
        texts = [jax.jit(fn).lower(arg).as_text(dialect="hlo") for fn, arg in cases]
    for text, (_, arg) in zip(texts, cases):
        assert "rng-bit-generator" in text
        xla, ours = run_hlo(text, arg), hloref.evaluate(text, arg)
        for a, b in zip(xla, ours):
            np.testing.assert_array_equal(bits_of(b), bits_of(a))


def test_rng_bit_generator_feeds_state_forward():
    # two generators chained through the state give a fresh block each time
    text = module("  s = u64[2] parameter(0)\n"
                  "  r0 = (u64[2], u32[6]) rng-bit-generator(s), algorithm=rng_three_fry\n"
                  "  st1 = u64[2] get-tuple-element(r0), index=0\n"
                  "  r1 = (u64[2], u32[6]) rng-bit-generator(st1), algorithm=rng_three_fry\n"
                  "  b0 = u32[6] get-tuple-element(r0), index=1\n"
                  "  b1 = u32[6] get-tuple-element(r1), index=1\n"
                  "  ROOT t = (u32[6], u32[6]) tuple(b0, b1)")
    state = np.array([3, 4], np.uint64)
    xla, ours = run_hlo(text, state), hloref.evaluate(text, state)
    assert compare_values(xla, ours).ok
    assert not np.array_equal(ours[0], ours[1])


def test_rng_bit_generator_rejects_bad_state():
    text = module("  s = u64[3] parameter(0)\n"
                  "  ROOT r = (u64[3], u32[4]) rng-bit-generator(s), algorithm=rng_three_fry")
    with pytest.raises(hloref.HloError):
        hloref.evaluate(text, np.zeros(3, np.uint64))


# ---------------------------------------------------------------------------
# rng-get-and-update-state
# ---------------------------------------------------------------------------

GET_STATE = module("  ROOT s = u64[2] rng-get-and-update-state(), delta=7")


def test_rng_get_and_update_state_first_value_matches_xla():
    exe = compile_hlo(GET_STATE.replace("HloModule m", "HloModule fresh_state_module"))
    first = exe.run()
    ours = hloref.evaluate(GET_STATE)
    np.testing.assert_array_equal(ours, first)
    np.testing.assert_array_equal(ours, [0x7012395, 0])


def test_rng_get_and_update_state_adds_delta_per_interpreter():
    m = hloref.parse(GET_STATE)
    it = Interpreter(m)
    got = [it.run([]) for _ in range(3)]
    assert [int(g[0]) for g in got] == [0x7012395, 0x7012395 + 7, 0x7012395 + 14]
    # a fresh interpreter starts over
    np.testing.assert_array_equal(Interpreter(m).run([]), got[0])
    # 128-bit carry
    it._rng_state = 2**64 - 3
    np.testing.assert_array_equal(it.run([]), [2**64 - 3, 0])
    np.testing.assert_array_equal(it.run([]), [4, 1])


# ---------------------------------------------------------------------------
# rng (hloref's own generator)
# ---------------------------------------------------------------------------

def rng_module(t, dims, dist, a, b):
    d = ",".join(map(str, dims))
    return module(f"  a = {t}[] constant({a})\n  b = {t}[] constant({b})\n"
                  f"  ROOT r = {t}[{d}] rng(a, b), distribution={dist}")


@pytest.mark.parametrize("t,a,b", [("f32", -2, 3), ("f64", 0, 1), ("f16", 1, 1.5),
                                   ("bf16", -1, 0)])
def test_rng_uniform_float_support_and_moments(t, a, b):
    text = rng_module(t, (20000,), "rng_uniform", a, b)
    x = hloref.evaluate(text).astype(np.float64)
    assert np.all(x >= a) and np.all(x < b)
    mean, var = (a + b) / 2, (b - a) ** 2 / 12
    assert abs(x.mean() - mean) < 5 * np.sqrt(var / x.size) + 0.01 * (b - a)
    assert abs(x.var() - var) < 0.05 * var
    # XLA:CPU's own rng has the same support (its bits differ)
    xla = run_hlo(rng_module(t, (1000,), "rng_uniform", a, b)).astype(np.float64)
    assert np.all(xla >= a) and np.all(xla < b)


@pytest.mark.parametrize("t,a,b", [("s32", -5, 5), ("u8", 0, 255), ("s64", -(2**63), 2**63 - 1),
                                   ("u64", 0, 2**64 - 1), ("s8", -128, -120), ("u4", 3, 9)])
def test_rng_uniform_int_support(t, a, b):
    x = hloref.evaluate(rng_module(t, (20000,), "rng_uniform", a, b))
    vals = [int(v) for v in x.astype(object).reshape(-1)] if x.dtype.itemsize == 8 else \
        x.astype(np.int64).tolist()
    assert min(vals) >= a and max(vals) < b
    if b - a <= 256:  # every value appears, roughly uniformly
        counts = np.bincount(np.array(vals) - a, minlength=b - a)
        expected = len(vals) / (b - a)
        chi2 = float(np.sum((counts - expected) ** 2 / expected))
        dof = b - a - 1
        assert counts.min() > 0 and chi2 < dof + 6 * np.sqrt(2 * max(dof, 1))


def test_rng_normal_moments():
    x = hloref.evaluate(rng_module("f64", (40000,), "rng_normal", 2, 3))
    assert abs(x.mean() - 2) < 0.05 and abs(x.std() - 3) < 0.05
    # ~68% within one sigma, ~95% within two
    z = (x - 2) / 3
    assert abs(np.mean(np.abs(z) < 1) - 0.6827) < 0.01
    assert abs(np.mean(np.abs(z) < 2) - 0.9545) < 0.01
    assert np.isfinite(x).all()
    f = hloref.evaluate(rng_module("f16", (4000,), "rng_normal", 0, 1)).astype(np.float64)
    assert abs(f.mean()) < 0.1 and abs(f.std() - 1) < 0.1


def test_rng_is_deterministic_per_interpreter():
    text = module("  a = f32[] constant(0)\n  b = f32[] constant(1)\n"
                  "  r0 = f32[100] rng(a, b), distribution=rng_uniform\n"
                  "  r1 = f32[100] rng(a, b), distribution=rng_uniform\n"
                  "  ROOT t = (f32[100], f32[100]) tuple(r0, r1)")
    m = hloref.parse(text)
    first = Interpreter(m).run([])
    again = Interpreter(m).run([])
    np.testing.assert_array_equal(first[0], again[0])
    np.testing.assert_array_equal(first[1], again[1])
    assert not np.array_equal(first[0], first[1])  # two draws differ
    it = Interpreter(m)
    it.run([])
    assert not np.array_equal(it.run([])[0], first[0])  # the stream moves on


def test_rng_degenerate_ranges_and_rejections():
    np.testing.assert_array_equal(hloref.evaluate(rng_module("f32", (4,), "rng_uniform", 2, 2)),
                                  [2, 2, 2, 2])
    np.testing.assert_array_equal(hloref.evaluate(rng_module("s32", (3,), "rng_uniform", 7, 7)),
                                  [7, 7, 7])
    assert hloref.evaluate(rng_module("f32", (0,), "rng_uniform", 0, 1)).shape == (0,)
    with pytest.raises(hloref.HloError):
        hloref.evaluate(rng_module("s32", (3,), "rng_normal", 0, 1))
