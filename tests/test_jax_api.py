"""hloref.jax: ``evaluate`` and ``check`` on JAX functions, against XLA:CPU and numpy.

Every value hloref returns is compared with what ``jax.jit(fn)`` returns on XLA:CPU
(and, where numpy has the operation, with numpy); ``check`` must call a correct
function a match and flag a wrong result at the right pytree path.
"""

from __future__ import annotations

from typing import NamedTuple

import ml_dtypes
import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

import hloref  # noqa: E402
import hloref.jax as hj  # noqa: E402

RNG = np.random.default_rng(13)


def _normal(shape, dtype=np.float32):
    return RNG.normal(size=shape).astype(dtype)


def _f64(x):
    return np.asarray(x).astype(np.float64)


def assert_close(ours, xla, *, ulps=4):
    """Same pytree structure, dtypes and shapes; integers exact, floats within a few
    ULPs of the element type relative to the element, plus as many relative to the
    array's largest magnitude (sums and products may cancel)."""
    ours_leaves, ours_tree = jax.tree_util.tree_flatten(ours)
    xla_leaves, xla_tree = jax.tree_util.tree_flatten(xla)
    assert ours_tree == xla_tree
    for o, x in zip(ours_leaves, xla_leaves):
        assert isinstance(o, np.ndarray), type(o)
        x = np.asarray(jax.random.key_data(x) if hj.is_key(x) else x)
        assert o.dtype == x.dtype and o.shape == x.shape, (o.dtype, x.dtype, o.shape, x.shape)
        if o.dtype.kind in "biu" or o.dtype == np.bool_:
            np.testing.assert_array_equal(o, x)
            continue
        if o.dtype.kind == "c":
            eps = np.finfo(o.real.dtype).eps
        else:
            eps = float(ml_dtypes.finfo(o.dtype).eps)
        a, b = o.astype(np.complex128 if o.dtype.kind == "c" else np.float64), \
            x.astype(np.complex128 if o.dtype.kind == "c" else np.float64)
        scale = np.maximum(np.abs(a), np.abs(b))
        finite = scale[np.isfinite(scale)]
        tol = ulps * eps * (scale + float(np.max(finite, initial=0.0)))
        bad = ~((np.abs(a - b) <= tol) | (np.isnan(a) & np.isnan(b)))
        assert not np.any(bad), f"{np.argwhere(bad)[:5]}: hloref {a[bad][:5]} xla {b[bad][:5]}"


def evaluate_and_check(fn, *args, ulps=4, **kwargs):
    ours = hj.evaluate(fn, *args, **kwargs)
    # XLA's value: the same jit hloref.jax lowers (non-array arguments static)
    xla = hj._jitted(fn, args, kwargs)(*args, **kwargs)
    assert_close(ours, xla, ulps=ulps)
    report = hj.check(fn, *args, **kwargs)
    assert report.verdict == "match", report.summary()
    assert report.paths == []
    assert_close(report.value, xla, ulps=ulps)
    return ours


# ------------------------------------------------------------------ pytrees


class Batch(NamedTuple):
    x: object
    y: object


def mlp(params, batch):
    h = jnp.tanh(batch.x @ params["w1"] + params["b1"])
    logits = h @ params["w2"]
    loss = jnp.mean((logits - batch.y) ** 2)
    return {"logits": logits, "stats": (loss, jnp.max(h, axis=0))}


PARAMS = {"w1": _normal((5, 8)), "b1": _normal((8,)), "w2": _normal((8, 3))}
BATCH = Batch(_normal((4, 5)), _normal((4, 3)))


def test_pytrees_in_and_out_against_xla_and_numpy():
    ours = evaluate_and_check(mlp, PARAMS, BATCH)
    assert set(ours) == {"logits", "stats"} and isinstance(ours["stats"], tuple)
    h = np.tanh(_f64(BATCH.x) @ _f64(PARAMS["w1"]) + _f64(PARAMS["b1"]))
    np.testing.assert_allclose(ours["logits"], h @ _f64(PARAMS["w2"]), rtol=1e-5, atol=1e-5)


def test_gradients_of_a_loss():
    def loss(params, batch):
        return mlp(params, batch)["stats"][0]

    grads = evaluate_and_check(jax.grad(loss), PARAMS, BATCH, ulps=16)
    assert set(grads) == set(PARAMS)
    value, g = evaluate_and_check(jax.value_and_grad(loss), PARAMS, BATCH, ulps=16)
    # against a central finite difference in float64 (numpy)
    def np_loss(w2):
        h = np.tanh(_f64(BATCH.x) @ _f64(PARAMS["w1"]) + _f64(PARAMS["b1"]))
        return np.mean((h @ w2 - _f64(BATCH.y)) ** 2)
    w2 = _f64(PARAMS["w2"])
    e = np.zeros_like(w2)
    e[2, 1] = 1e-6
    fd = (np_loss(w2 + e) - np_loss(w2 - e)) / 2e-6
    np.testing.assert_allclose(g["w2"][2, 1], fd, rtol=1e-3, atol=1e-5)
    np.testing.assert_allclose(value, np_loss(w2), rtol=1e-5)


# ------------------------------------------------------------------ dtypes


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.int8, np.uint16, np.int32,
                                   np.complex64, np.bool_])
def test_elementwise_dtypes(dtype):
    if dtype == np.bool_:
        x = RNG.integers(0, 2, size=(3, 4)).astype(np.bool_)
        fn = lambda a: (a & ~a[::-1], jnp.logical_xor(a, True))  # noqa: E731
    elif np.dtype(dtype).kind in "iu":
        x = RNG.integers(0, 100, size=(3, 4)).astype(dtype)
        fn = lambda a: (a * 3 + 7, a // 3, jnp.max(a, axis=1))  # noqa: E731
    elif np.dtype(dtype).kind == "c":
        x = (_normal((3, 4)) + 1j * _normal((3, 4))).astype(dtype)
        fn = lambda a: (a * a.conj() + 1, jnp.exp(a), jnp.abs(a))  # noqa: E731
    else:
        x = _normal((3, 4), dtype)
        fn = lambda a: (a * a + 1, jnp.exp(a), jnp.sum(a, axis=0))  # noqa: E731
    ours = evaluate_and_check(fn, x, ulps=8)
    if np.dtype(dtype).kind in "iu":
        np.testing.assert_array_equal(ours[0], (x * 3 + 7).astype(dtype))


@pytest.mark.parametrize("f8", [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2])
def test_fp8_matmul_scaled_to_bf16(f8):
    a = _normal((4, 8)).astype(f8)
    b = _normal((8, 3)).astype(f8)

    def fp8_matmul(a, b, scale):
        acc = jnp.dot(a, b, preferred_element_type=jnp.float32)
        return (acc * scale).astype(jnp.bfloat16), (a.astype(jnp.float32) * 2).astype(f8)

    ours = evaluate_and_check(fp8_matmul, a, b, np.float32(0.5))
    assert ours[0].dtype == ml_dtypes.bfloat16 and ours[1].dtype == f8
    exact = (a.astype(np.float64) @ b.astype(np.float64)) * 0.5
    np.testing.assert_allclose(ours[0].astype(np.float64), exact, rtol=2 ** -7, atol=1e-2)


# ------------------------------------------------------------------ control flow, sorts, convs


def test_scan_and_while_against_numpy():
    x = _normal((10, 3))

    def cumulative(x):
        def step(carry, row):
            carry = carry * 0.5 + row
            return carry, carry.sum()
        final, sums = lax.scan(step, jnp.zeros(3), x)
        count = lax.while_loop(lambda c: c[1] < 100.0, lambda c: (c[0] + 1, c[1] * 2 + 1),
                               (0, 1.0))
        return final, sums, count

    final, sums, count = evaluate_and_check(cumulative, x)
    carry = np.zeros(3)
    expect = []
    for row in _f64(x):
        carry = carry * 0.5 + row
        expect.append(carry.sum())
    np.testing.assert_allclose(final, carry, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(sums, expect, rtol=1e-5, atol=1e-5)
    assert int(count[0]) == 6 and float(count[1]) == 127.0


def test_sorts_against_numpy():
    x = _normal((4, 9))
    x[1, 3] = np.nan
    keys = RNG.integers(0, 3, size=9).astype(np.int32)

    def sorts(x, keys):
        return (jnp.sort(x, axis=1), jnp.argsort(keys, stable=True),
                lax.sort((keys, x[0]), num_keys=1), lax.top_k(x, 3))

    s, order, (k_sorted, v_sorted), (top_v, top_i) = evaluate_and_check(sorts, x, keys)
    np.testing.assert_array_equal(s, np.sort(x, axis=1))  # NaN last, as numpy
    np.testing.assert_array_equal(order, np.argsort(keys, kind="stable"))
    perm = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(k_sorted, keys[perm])
    np.testing.assert_array_equal(v_sorted, x[0][perm])
    np.testing.assert_array_equal(top_v[0], np.sort(x[0])[::-1][:3])


def test_convolution_against_numpy():
    img = _normal((2, 3, 9, 9))  # NCHW
    ker = _normal((4, 3, 3, 3))  # OIHW

    def conv(img, ker):
        return lax.conv_general_dilated(img, ker, window_strides=(2, 1), padding="SAME",
                                        rhs_dilation=(1, 2))

    out = evaluate_and_check(conv, img, ker, ulps=16)
    # direct loops in float64
    k_dil = np.zeros((4, 3, 3, 5))
    k_dil[..., ::2] = _f64(ker)
    pad_h = max((5 - 1) * 2 + 3 - 9, 0)
    pad_w = max((9 - 1) * 1 + 5 - 9, 0)
    padded = np.pad(_f64(img), ((0, 0), (0, 0), (pad_h // 2, pad_h - pad_h // 2),
                                (pad_w // 2, pad_w - pad_w // 2)))
    expect = np.zeros((2, 4, 5, 9))
    for i in range(5):
        for j in range(9):
            patch = padded[:, :, 2 * i:2 * i + 3, j:j + 5]
            expect[:, :, i, j] = np.einsum("nchw,ochw->no", patch, k_dil)
    np.testing.assert_allclose(out, expect, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------ arguments


def test_static_arguments_and_unused_arguments():
    x = _normal((3,))

    def f(x, unused, mode, *, power):
        return x * 2 if mode == "double" else x ** power

    prog = hj.program(f, x, x, "double", power=3)
    assert len(prog.module.entry.parameters) == 1  # jit drops the unused argument
    np.testing.assert_array_equal(evaluate_and_check(f, x, x, "double", power=3), x * 2)
    cube = evaluate_and_check(f, x, x, "cube", power=3)
    np.testing.assert_allclose(cube, x.astype(np.float64) ** 3, rtol=1e-6)

    jf = jax.jit(lambda x, n, unused: x * n, static_argnums=1, keep_unused=True)
    prog = hj.program(jf, x, 5, x)
    assert len(prog.module.entry.parameters) == 2  # keep_unused keeps it
    np.testing.assert_array_equal(evaluate_and_check(jf, x, 5, x), x * 5)


def test_closed_over_arrays_and_prng_keys():
    table = jnp.asarray(RNG.normal(size=(64,)).astype(np.float32))

    def f(key, idx):
        k1, k2 = jax.random.split(key)
        noise = jax.random.normal(k1, (4,))
        return table[idx] + noise, k2, jax.random.bits(k2, (3,))

    key = jax.random.key(7)
    idx = np.array([1, 5, 63, 0], np.int32)
    value, k2, bits = evaluate_and_check(f, key, idx)
    xla_value, xla_k2, xla_bits = jax.jit(f)(key, idx)
    np.testing.assert_array_equal(k2, np.asarray(jax.random.key_data(xla_k2)))
    np.testing.assert_array_equal(bits, np.asarray(xla_bits))  # threefry: bit exact


def test_evaluate_returns_numpy_not_jax_arrays():
    out = hj.evaluate(lambda x: {"a": x + 1}, np.arange(3, dtype=np.int32))
    assert type(out["a"]) is np.ndarray
    np.testing.assert_array_equal(out["a"], [1, 2, 3])


def test_a_matching_check_runs_xla_once_and_starts_no_worker(monkeypatch):
    import hloref.fuzz.workers as workers

    def no_worker(*a, **k):
        raise AssertionError("a matching check must not start an oracle worker")

    monkeypatch.setattr(workers, "OracleWorker", no_worker)
    report = hj.check(mlp, PARAMS, BATCH)
    assert report.verdict == "match", report.summary()


def test_host_callbacks_are_unsupported_not_wrong():
    x = _normal((3,))
    report = hj.check(lambda x: jax.pure_callback(np.sin, jax.ShapeDtypeStruct(x.shape, x.dtype),
                                                  x), x)
    assert report.verdict == "unsupported"
    assert "custom-call" in report.message


# ------------------------------------------------------------------ wrong results


def test_planted_wrong_result_is_flagged_at_its_pytree_path():
    prog = hj.program(mlp, PARAMS, BATCH)
    xla = prog.run_xla_flat()
    names = prog.output_names
    i = names.index("out['logits']")
    tampered = [a.copy() for a in xla]
    tampered[i][1, 2] += 0.25 * (1 + abs(float(tampered[i][1, 2])))
    report = prog.check(oracle_flat=tampered, blame=False)
    assert report.verdict == "mismatch", report.summary()
    assert report.paths == ["out['logits'][1, 2]"]
    assert "out['logits'][1, 2]" in report.summary()
    # and the untampered outputs match
    assert prog.check(oracle_flat=xla, blame=False).verdict == "match"


def test_a_real_xla_wrong_result_is_found_localised_and_blamed():
    """findings/known-upstream/xla-cpu-jaxlib-0.10.2/s4-add-does-not-wrap, reached from ordinary JAX."""
    x = np.array([[-8, 7, 3, -1], [1, 2, -3, 4]], dtype=ml_dtypes.int4)

    def double(x):
        return {"doubled": (x + x).astype(jnp.int8)}

    wrapped = ((x.astype(np.int64) * 2 + 8) % 16 - 8).astype(np.int8)  # s4 arithmetic wraps
    xla = np.asarray(jax.jit(double)(x)["doubled"])
    assert not np.array_equal(xla, wrapped), "jaxlib's s4 add bug no longer reproduces"
    np.testing.assert_array_equal(hj.evaluate(double, x)["doubled"], wrapped)
    report = hj.check(double, x)
    assert report.verdict == "mismatch", report.summary()
    assert report.paths == ["out['doubled'][0, 0]"]
    assert report.blamed_pass == "float-normalization-s4"
    np.testing.assert_array_equal(report.value["doubled"], wrapped)
    np.testing.assert_array_equal(report.oracle_value["doubled"], xla)


def test_float0_tangents_of_integers_and_foreign_values():
    grad = jax.grad(lambda x, n: x * n, argnums=(0, 1), allow_int=True)
    gx, gn = hj.evaluate(grad, np.float32(2.0), np.int32(3))
    assert float(gx) == 3.0
    xla_gn = jax.jit(grad)(np.float32(2.0), np.int32(3))[1]
    assert xla_gn.dtype == jax.dtypes.float0
    # float0 carries no data; XLA holds it as pred zeros, and so does hloref
    assert gn.dtype == np.bool_ and gn.shape == xla_gn.shape and not gn.any()
    assert hj.check(grad, np.float32(2.0), np.int32(3)).verdict == "match"
    assert hj.to_numpy(xla_gn).dtype == np.bool_
    with pytest.raises(hloref.HloUnsupportedError):
        hj.to_numpy(object())


MULTI_DEVICE = r'''
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import Mesh, PartitionSpec as P
import hloref.jax as hj
assert len(jax.devices()) == 8

x = np.arange(32.0, dtype=np.float32).reshape(8, 4)
f = jax.pmap(lambda x: jax.lax.psum(x * 2, "i"), axis_name="i")
np.testing.assert_array_equal(hj.evaluate(f, x), np.broadcast_to((x * 2).sum(0), x.shape))
assert hj.check(f, x).verdict == "match"

mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ("i", "j"))
def body(a, b):
    s = jax.lax.psum(a @ b, "j")
    gathered = jax.lax.all_gather(a, "i", tiled=True)
    where = (jax.lax.axis_index("i") + 10 * jax.lax.axis_index("j")).reshape(1, 1)
    return {"product": s, "gathered": gathered, "where": where}
g = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P("i", "j"), P("j", None)),
                          out_specs={"product": P("i"), "gathered": P(None, "j"),
                                     "where": P("i", "j")}, check_vma=False))
rng = np.random.default_rng(0)
a = rng.normal(size=(8, 6)).astype(np.float32)
b = rng.normal(size=(6, 3)).astype(np.float32)
ours = hj.evaluate(g, a, b)
np.testing.assert_allclose(ours["product"], a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
np.testing.assert_array_equal(ours["gathered"], a)
np.testing.assert_array_equal(ours["where"], np.arange(4)[:, None] + 10 * np.arange(2)[None])
xla = g(a, b)
np.testing.assert_array_equal(ours["where"], np.asarray(xla["where"]))
report = hj.check(g, a, b)
assert report.verdict == "match", report.summary()

prog = hj.program(g, a, b)
flat = prog.run_xla_flat()
i = prog.output_names.index("out['gathered']")
flat[i] = flat[i].copy()
flat[i][5, 4] += 1.0
report = prog.check(oracle_flat=flat)
assert report.verdict == "mismatch" and report.paths == ["out['gathered'][5, 4]"], report.summary()
# the psum of per-device matmuls is judged by the numerical envelope: XLA's summation
# order is inside, a 0.02 % error in one element is not
flat = prog.run_xla_flat()
j = prog.output_names.index("out['product']")
flat[j] = flat[j].copy()
flat[j][3, 1] *= np.float32(1.0002)
report = prog.check(oracle_flat=flat)
assert report.verdict == "mismatch" and report.paths == ["out['product'][3, 1]"], report.summary()
assert report.mismatches[0][1].widths > 1  # envelope widths outside
print("MULTI-DEVICE OK")
'''


def test_shard_map_and_pmap_on_eight_host_devices():
    """jax needs its device count before it starts: a fresh process with 8 CPU devices."""
    import os
    import subprocess
    import sys
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8")
    done = subprocess.run([sys.executable, "-c", MULTI_DEVICE], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0 and "MULTI-DEVICE OK" in done.stdout, done.stderr[-4000:]
