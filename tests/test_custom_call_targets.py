"""Custom-call targets whose value does not depend on a library: ``GetRngSeed``,
``AllocateBuffer`` and results without elements, against XLA:CPU (jaxlib 0.10.2) on the
modules of XLA's own tests (prng_test.cc:439, host_offloader_test.cc:5066,
ir_emission_utils_test.cc:716) and by hand."""

from __future__ import annotations

import numpy as np
import pytest

import hloref

pytest.importorskip("jax")
from hloref.fuzz.oracles import xla  # noqa: E402

SEEDS = """HloModule test
SubComp {
  ROOT scall = u64[] custom-call(), custom_call_target="GetRngSeed"
}
ENTRY entry {
  call1 = u64[] custom-call(), custom_call_target="GetRngSeed"
  call2 = u64[] call(), to_apply=SubComp
  ROOT tuple = (u64[], u64[]) tuple(call1, call2)
}
"""

OFFLOAD = """HloModule my_module
ENTRY main {
  allocate = f32[1024] custom-call(), custom_call_target="AllocateBuffer"
  offload = f32[1024] custom-call(allocate), custom_call_target="MoveToHost"
  param = f32[1024] parameter(0)
  constant_f32_1 = f32[] constant(1)
  broadcast = f32[1024] broadcast(constant_f32_1), dimensions={}
  add = f32[1024] add(broadcast, broadcast)
  mth = f32[1024] custom-call(add), custom_call_target="MoveToHost"
  constant_s32_0 = s32[] constant(0)
  update_slice = f32[1024] dynamic-update-slice(offload, mth, constant_s32_0)
  mtd = f32[1024] custom-call(update_slice), custom_call_target="MoveToDevice"
  ROOT root = f32[1024] add(mtd, mtd)
}
"""

EMPTY = """HloModule e
ENTRY e {
  ROOT _ = u8[0] custom-call(), custom_call_target="", backend_config={"cudnn_fmha_backend_config": {"algorithm": {}}}
}
"""


def test_get_rng_seed_gives_each_call_a_u64_as_xla_cpu_does():
    """GetRngSeed's value is implementation-defined: XLA:CPU gives the two calls of one
    run different u64 values (checked here); hloref gives u64 scalars that differ too,
    and the same ones again in a new evaluation (a fresh state)."""
    x1, x2 = (np.asarray(v) for v in xla.run_hlo(SEEDS))
    assert x1.dtype == np.uint64 and x1.shape == () and x1 != x2
    h1, h2 = (np.asarray(v) for v in hloref.evaluate(SEEDS))
    assert h1.dtype == np.uint64 and h1.shape == () and h1 != h2
    again = tuple(np.asarray(v) for v in hloref.evaluate(SEEDS))
    assert again == (h1, h2)


def test_a_buffer_allocated_for_offloading_then_filled_matches_xla():
    """AllocateBuffer's contents are undefined until written; the module overwrites all
    1,024 elements with 1 + 1 before reading: 2 + 2 = 4 everywhere (by hand, and XLA)."""
    p = np.zeros(1024, np.float32)
    got = np.asarray(hloref.evaluate(OFFLOAD, p))
    np.testing.assert_array_equal(got, np.full(1024, 4.0, np.float32))
    np.testing.assert_array_equal(np.asarray(xla.run_hlo(OFFLOAD, p)), got)


def test_any_target_with_an_empty_result_has_its_one_value():
    got = np.asarray(hloref.evaluate(EMPTY))
    assert got.shape == (0,) and got.dtype == np.uint8
    want = np.asarray(xla.run_hlo(EMPTY))
    assert want.shape == (0,) and want.dtype == np.uint8


def test_an_unknown_target_with_elements_is_still_refused():
    text = EMPTY.replace("u8[0]", "u8[2]")
    with pytest.raises(hloref.HloUnsupportedError, match="has no registered semantics"):
        hloref.evaluate(text)


QR = """HloModule qr
ENTRY e {
  a = f32[2,5,3] parameter(0)
  qr = (f32[2,5,3], f32[2,3]) custom-call(a), custom_call_target="Qr"
  packed = f32[2,5,3] get-tuple-element(qr), index=0
  taus = f32[2,3] get-tuple-element(qr), index=1
  q = f32[2,5,3] custom-call(packed, taus), custom_call_target="ProductOfElementaryHouseholderReflectors"
  ROOT t = (f32[2,5,3], f32[2,5,3], f32[2,3]) tuple(q, packed, taus)
}
"""


def test_xla_qr_custom_calls_against_numpy_and_xla_cpu():
    """``Qr`` returns LAPACK geqrf's packed (R above the diagonal, Householder vectors
    below) and taus; ``ProductOfElementaryHouseholderReflectors`` the Q they make
    (xla/hlo/builder/lib/qr.cc; XLA's QrExpander uses LAPACK's sign conventions). By
    hand: Q has orthonormal columns, Q R = A, and R is numpy's (the same LAPACK). XLA:CPU
    (its f32 expansion) agrees within the envelope; Q 0.2 % off in one element is
    flagged."""
    from hloref.fuzz.differential import diff
    from hloref.fuzz.workers import OracleWorker
    a = np.random.default_rng(3).standard_normal((2, 5, 3)).astype(np.float32)
    q, packed, taus = (np.asarray(v, np.float64) for v in hloref.evaluate(QR, a))
    r = np.triu(packed[:, :3, :])
    for b in range(2):
        np.testing.assert_allclose(q[b].T @ q[b], np.eye(3), atol=1e-6)
        np.testing.assert_allclose(q[b] @ r[b], a[b], atol=1e-5)
        np.testing.assert_allclose(r[b], np.linalg.qr(a[b].astype(np.float64))[1], atol=1e-5)
    with OracleWorker("xla") as worker:
        good = diff(QR, [a], worker=worker)
        assert good.verdict == "match", good.summary()
        bad = [np.array(v, copy=True) for v in good.expected]
        bad[0][1, 2, 1] = np.float32(bad[0][1, 2, 1] * 1.002)
        assert diff(QR, [a], worker=worker, oracle_value=tuple(bad)).verdict == "mismatch"
