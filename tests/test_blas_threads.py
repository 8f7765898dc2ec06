"""hloref's BLAS calls run on one OpenBLAS thread, whatever the process's setting
(``evaluator/blas_threads.py``): a ``dot`` gives the bits of numpy's dgemm on one
thread, with the process set to one thread or to two before the call, and the
process's setting is as it was afterwards. The shapes are ones whose products on one
and on two OpenBLAS threads differ (checked here first), so the test fails where the
evaluator's BLAS follows the process's setting."""

from __future__ import annotations

import numpy as np
import pytest

import hloref
from hloref.errors import HloEvalError
from hloref.evaluator import blas_threads

#: [m, k] x [k, n] products above OpenBLAS's one-thread threshold (262,144
#: multiply-adds) whose f64 results on one and on two threads differ in some bit here
SHAPES = [(189, 205, 302), (380, 136, 176), (241, 160, 112), (313, 241, 11)]


def _dot_module(ty: str, m: int, k: int, n: int):
    return hloref.parse(f"""HloModule m
ENTRY e {{
  a = {ty}[{m},{k}] parameter(0)
  b = {ty}[{k},{n}] parameter(1)
  ROOT r = {ty}[{m},{n}] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}""")


def _numpy_product(a64, b64, threads: int) -> np.ndarray:
    blas_threads.set_process_threads(threads)
    return np.matmul(a64, b64)


@pytest.fixture
def process_threads():
    """Puts the process's OpenBLAS setting back after the test."""
    before = blas_threads.process_threads()
    assert before, "no OpenBLAS library found in the process: numpy's BLAS is not OpenBLAS"
    yield
    for count in set(before.values()):
        blas_threads.set_process_threads(count)


def _operands(m, k, n, seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, k)), rng.standard_normal((k, n))


def test_threads_change_numpy_products_here(process_threads):
    """The premise: numpy's dgemm on two threads differs from one thread here."""
    differ = 0
    for i, (m, k, n) in enumerate(SHAPES):
        a, b = _operands(m, k, n, i)
        one, two = _numpy_product(a, b, 1), _numpy_product(a, b, 2)
        differ += not np.array_equal(one.view(np.uint64), two.view(np.uint64))
    assert differ >= 1


@pytest.mark.parametrize("process", [1, 2])
def test_f64_dot_has_the_one_thread_bits(process_threads, process):
    for i, (m, k, n) in enumerate(SHAPES):
        a, b = _operands(m, k, n, i)
        want = _numpy_product(a, b, 1)
        blas_threads.set_process_threads(process)
        got = hloref.evaluate(_dot_module("f64", m, k, n), a, b)
        np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))
        assert set(blas_threads.process_threads().values()) == {process}


def test_f32_dot_is_one_thread_dgemm_rounded(process_threads):
    for i, (m, k, n) in enumerate(SHAPES):
        a, b = (x.astype(np.float32) for x in _operands(m, k, n, i))
        want = _numpy_product(a.astype(np.float64), b.astype(np.float64), 1).astype(np.float32)
        blas_threads.set_process_threads(2)
        got = hloref.evaluate(_dot_module("f32", m, k, n), a, b)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
        assert set(blas_threads.process_threads().values()) == {2}


def test_override_gives_the_process_count_threads(process_threads):
    """``configure(2)`` (as ``HLOREF_BLAS_THREADS=2``): two-thread bits, even with the
    process on one thread."""
    m, k, n = SHAPES[0]
    a, b = _operands(m, k, n, 0)
    want = _numpy_product(a, b, 2)
    blas_threads.set_process_threads(1)
    blas_threads.configure(2)
    try:
        got = hloref.evaluate(_dot_module("f64", m, k, n), a, b)
    finally:
        blas_threads.configure(None)
    np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))
    assert set(blas_threads.process_threads().values()) == {1}


def test_bad_environment_value_is_a_clear_error(monkeypatch, process_threads):
    monkeypatch.setenv(blas_threads.ENV, "many")
    blas_threads.configure(None)
    try:
        with pytest.raises(HloEvalError, match="HLOREF_BLAS_THREADS='many': expected a whole"):
            hloref.evaluate(_dot_module("f64", 2, 2, 2), np.eye(2), np.eye(2))
    finally:
        monkeypatch.delenv(blas_threads.ENV)
        blas_threads.configure(None)
    assert blas_threads.threads() == 1


def test_scipy_openblas_is_switched_too(process_threads):
    """scipy's wheels bundle their own OpenBLAS (the LAPACK custom calls'): inside a
    call both libraries are on one thread, afterwards both as the process set them."""
    import scipy.linalg  # noqa: F401  (loads scipy's OpenBLAS)
    blas_threads.set_process_threads(2)
    inside = blas_threads.blas_call(blas_threads.process_threads)
    assert len(inside) >= 2 and set(inside.values()) == {1}
    after = blas_threads.process_threads()
    assert after.keys() == inside.keys() and set(after.values()) == {2}
