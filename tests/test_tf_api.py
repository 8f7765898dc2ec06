"""hloref.tf: ``evaluate`` and ``check`` on ``tf.function(jit_compile=True)``, against
TensorFlow's own XLA and numpy; two TF XLA wrong results reached from TF code."""

from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")

from tensorflow.python.framework import dtypes as tf_dtypes  # noqa: E402

import hloref.tf as ht  # noqa: E402

F8 = tf_dtypes.float8_e4m3fn  # not exported as tf.float8_e4m3fn in TF 2.21

RNG = np.random.default_rng(21)


def _normal(shape, dtype=np.float32):
    return RNG.normal(size=shape).astype(dtype)


def _flat(x):
    return tf.nest.flatten(x, expand_composites=True)


def assert_close(ours, theirs, *, ulps=4):
    """Same nest structure, dtypes and shapes; integers exact; floats within a few ULPs
    of the element and of the array's largest magnitude (sums may cancel)."""
    tf.nest.assert_same_structure(ours, theirs, expand_composites=True)
    for o, t in zip(_flat(ours), _flat(theirs)):
        assert isinstance(o, np.ndarray), type(o)
        t = np.asarray(t.numpy() if hasattr(t, "numpy") else t)
        assert o.dtype == t.dtype and o.shape == t.shape, (o.dtype, t.dtype, o.shape, t.shape)
        if o.dtype.kind in "biu":
            np.testing.assert_array_equal(o, t)
            continue
        eps = float(ml_dtypes.finfo(o.dtype).eps)
        a, b = o.astype(np.float64), t.astype(np.float64)
        scale = np.maximum(np.abs(a), np.abs(b))
        tol = ulps * eps * (scale + float(np.max(scale[np.isfinite(scale)], initial=0.0)))
        bad = ~((np.abs(a - b) <= tol) | (np.isnan(a) & np.isnan(b)))
        assert not np.any(bad), f"hloref {a[bad][:5]} tf {b[bad][:5]}"


def evaluate_and_check(fn, *args, ulps=4, **kwargs):
    ours = ht.evaluate(fn, *args, **kwargs)
    theirs = fn(*args, **kwargs)  # TensorFlow's XLA (jit_compile=True)
    assert_close(ours, theirs, ulps=ulps)
    report = ht.check(fn, *args, **kwargs)
    assert report.verdict == "match", report.summary()
    assert report.paths == []
    return ours


def test_nested_inputs_and_outputs_defaults_and_python_values():
    @tf.function(jit_compile=True)
    def layer(x, params, scale=0.5, *, activation="tanh"):
        h = tf.matmul(x, params["w"]) + params["b"]
        h = tf.tanh(h) if activation == "tanh" else tf.nn.relu(h)
        return {"h": h * scale, "stats": (tf.reduce_mean(h), tf.reduce_max(h, axis=0))}

    params = {"w": _normal((5, 4)), "b": _normal((4,))}
    x = _normal((3, 5))
    ours = evaluate_and_check(layer, x, params, activation="relu")
    h = np.maximum(x.astype(np.float64) @ params["w"] + params["b"], 0)
    np.testing.assert_allclose(ours["h"], h * 0.5, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours["stats"][1], h.max(axis=0), rtol=1e-5, atol=1e-6)
    ours = evaluate_and_check(layer, x, params, 2.0)
    np.testing.assert_allclose(ours["h"], 2 * np.tanh(x.astype(np.float64) @ params["w"]
                                                      + params["b"]), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.int8, np.int32,
                                   np.float64])
def test_dtypes(dtype):
    @tf.function(jit_compile=True)
    def f(a):
        if a.dtype.is_integer:
            return a * 3 + 1, tf.reduce_max(a, axis=1)
        return a * a + 1, tf.exp(a), tf.reduce_sum(a, axis=0)

    x = RNG.integers(-20, 20, size=(3, 4)).astype(dtype) if np.dtype(dtype).kind == "i" \
        else _normal((3, 4), dtype)
    ours = evaluate_and_check(f, x, ulps=8)
    if np.dtype(dtype).kind == "i":
        np.testing.assert_array_equal(ours[0], (x * 3 + 1).astype(dtype))


def test_fp8_cast_and_matmul():
    @tf.function(jit_compile=True)
    def f(a, b):
        a8 = tf.cast(a, F8)
        b8 = tf.cast(b, F8)
        return tf.cast(a8, tf.float32) @ tf.cast(b8, tf.float32), a8

    a, b = _normal((4, 8)), _normal((8, 2))
    product, a8 = evaluate_and_check(f, a, b)
    assert a8.dtype == ml_dtypes.float8_e4m3fn
    np.testing.assert_array_equal(a8, a.astype(ml_dtypes.float8_e4m3fn))  # ml_dtypes rounding
    exact = a8.astype(np.float64) @ b.astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    np.testing.assert_allclose(product, exact, rtol=1e-5, atol=1e-5)


def test_loops_sorts_and_convolutions_against_numpy():
    @tf.function(jit_compile=True)
    def f(x, img, ker):
        cums = tf.scan(lambda acc, v: acc * 0.5 + v, x)
        i, total = tf.while_loop(lambda i, t: i < 5, lambda i, t: (i + 1, t + tf.cast(i, tf.float32)),
                                 (tf.constant(0), tf.constant(0.0)))
        conv = tf.nn.conv2d(img, ker, strides=1, padding="VALID")
        return cums, total, tf.sort(x, direction="DESCENDING"), tf.argsort(x), conv

    x = _normal((7,))
    img, ker = _normal((1, 6, 6, 2)), _normal((3, 3, 2, 4))
    cums, total, desc, order, conv = evaluate_and_check(f, x, img, ker, ulps=16)
    acc, expect = 0.0, []
    for v in x.astype(np.float64):
        acc = acc * 0.5 + v if expect else v
        expect.append(acc)
    np.testing.assert_allclose(cums, expect, rtol=1e-5, atol=1e-6)
    assert float(total) == 10.0
    np.testing.assert_array_equal(desc, np.sort(x)[::-1])
    np.testing.assert_array_equal(order, np.argsort(x, kind="stable"))
    ref = np.zeros((1, 4, 4, 4))
    for i in range(4):
        for j in range(4):
            ref[0, i, j] = np.einsum("hwc,hwco->o", img[0, i:i + 3, j:j + 3].astype(np.float64),
                                     ker.astype(np.float64))
    np.testing.assert_allclose(conv, ref, rtol=1e-4, atol=1e-4)


def test_gradients_and_variables():
    w = tf.Variable(_normal((3, 2)))
    step_count = tf.Variable(0)

    @tf.function(jit_compile=True)
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((tf.matmul(x, w) - y) ** 2)
        g = tape.gradient(loss, w)
        w.assign_sub(0.1 * g)
        step_count.assign_add(1)
        return loss, g

    x, y = _normal((8, 3)), _normal((8, 2))
    w0 = w.numpy().astype(np.float64)
    loss, g = ht.evaluate(train_step, x, y)
    assert int(step_count.numpy()) == 0 and np.array_equal(w.numpy(), w0.astype(np.float32))
    r = x.astype(np.float64) @ w0 - y
    np.testing.assert_allclose(loss, np.mean(r ** 2), rtol=1e-5)
    np.testing.assert_allclose(g, 2 * x.astype(np.float64).T @ r / r.size, rtol=1e-4, atol=1e-6)
    report = ht.check(train_step, x, y)  # runs the step on TF: the variables move
    assert report.verdict == "match", report.summary()
    assert int(step_count.numpy()) == 1
    assert {"variable " + w.name, "variable " + step_count.name} <= set(report.output_names)
    np.testing.assert_allclose(w.numpy(), w0 - 0.1 * g, rtol=1e-5, atol=1e-6)


def test_planted_wrong_result_is_flagged_at_its_path():
    @tf.function(jit_compile=True)
    def f(x):
        return {"logits": tf.matmul(x, x, transpose_b=True), "norm": tf.norm(x)}

    x = _normal((4, 3))
    prog = ht.program(f, x)
    flat = prog.run_tf_flat()
    names = prog.output_names
    assert sorted(names) == ["out['logits']", "out['norm']"]
    i = names.index("out['logits']")
    flat[i] = flat[i].copy()
    flat[i][2, 1] = flat[i][2, 1] * 1.5 + 1
    report = prog.check(oracle_flat=flat)
    assert report.verdict == "mismatch", report.summary()
    assert report.paths == ["out['logits'][2, 1]"]
    assert prog.check(oracle_flat=prog.run_tf_flat()).verdict == "match"


def test_tf_xla_atan2_of_zero_is_nan():
    """findings/known-upstream/tf-2.21/atan2-zero-zero-nan, from TF code: atan2(+0, +0) is +0 (C99,
    numpy), TensorFlow's XLA returns NaN when the zero comes from xor(p, p)."""
    @tf.function(jit_compile=True)
    def angle(p):
        zero = tf.cast(tf.bitwise.bitwise_xor(p, p), tf.float32)
        return {"angle": tf.math.atan2(zero, zero)}

    p = np.array([1, -3, 7], np.int8)
    np.testing.assert_array_equal(ht.evaluate(angle, p)["angle"], np.arctan2(0.0, 0.0))
    assert np.isnan(angle(p)["angle"].numpy()).all(), "the TF bug no longer reproduces"
    report = ht.check(angle, p)
    assert report.verdict == "mismatch", report.summary()
    assert report.paths == ["out['angle'][0]"]


def test_tf_xla_atanh_f64_is_104_ulp_off():
    """findings/known-upstream/tf-2.21/atanh-f64-104-ulp, from TF code; the culprit is named."""
    @tf.function(jit_compile=True)
    def atanh(x):
        return tf.math.atanh(x)

    x = np.array([0.1, 0.41085600773100933, 0.5])
    ours = ht.evaluate(atanh, x)
    np.testing.assert_allclose(ours, np.arctanh(x), rtol=2 ** -52)  # within 1 ULP of numpy
    report = ht.check(atanh, x)
    assert report.verdict == "mismatch", report.summary()
    assert report.paths == ["out[1]"]
    assert report.culprit is not None
