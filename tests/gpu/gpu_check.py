"""Shared helpers of the GPU backend tests: input generators, a one-instruction module
builder, bit-exact comparison, ``check`` (gpu against the cpu backend and XLA:CPU) and
``check_devices`` (the same on several devices, against the cpu backend)."""

from __future__ import annotations

import warnings

import numpy as np

import hloref
from hloref.fuzz.compare import compare_values
from hloref.types import element_type

try:
    from hloref.fuzz.oracles.errors import OracleError, OracleUnsupported
    from hloref.fuzz.oracles.xla import available as xla_available, run_hlo
    HAVE_XLA = xla_available()
except Exception:  # pragma: no cover
    HAVE_XLA = False

RNG = np.random.default_rng(1234)
FLOATS = ["f32", "bf16", "f16", "f8e4m3fn"]
SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.5, -2.5, 0.5]


def values(tname, dims, *, kind="normal"):
    et = element_type(tname)
    n = int(np.prod(dims)) if dims else 1
    if et.is_pred:
        return RNG.integers(0, 2, dims).astype(bool)
    if et.is_integer:
        lo, hi = et.min_value, et.max_value
        v = RNG.integers(lo, hi, n, endpoint=True, dtype=np.int64 if et.kind == "sint" else np.uint64)
        if kind == "small":
            v = RNG.integers(-3 if et.kind == "sint" else 0, 4, n).astype(v.dtype)
        v[: min(3, n)] = 0 if et.kind == "uint" else [0, -1, lo][: min(3, n)]
        return v.astype(et.dtype).reshape(dims)
    v = RNG.standard_normal(n) * 3
    if kind == "positive":
        v = np.abs(v) + 0.25
    if kind == "unit":
        v = np.tanh(v) * 0.9
    k = min(len(SPECIALS), n // 4) if kind == "normal" else 0
    v[:k] = SPECIALS[:k]
    return v.astype(et.dtype).reshape(dims)


def module(params, root, out, extra=""):
    lines = [f"  p{i} = {t} parameter({i})" for i, t in enumerate(params)]
    return "HloModule m\n" + extra + "\nENTRY e {\n" + "\n".join(lines) + f"\n  ROOT r = {out} {root}\n}}\n"


def bits_equal(a, b):
    if isinstance(a, tuple):
        return all(bits_equal(x, y) for x, y in zip(a, b))
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    if a.dtype.kind in "biu" or a.dtype == bool:
        return np.array_equal(a, b)
    nan_a = np.isnan(a.astype(np.float64)) if a.dtype.kind != "c" else np.isnan(a)
    nan_b = np.isnan(b.astype(np.float64)) if b.dtype.kind != "c" else np.isnan(b)
    av = a.view(f"u{a.dtype.itemsize}") if a.dtype.kind != "c" else a.view(np.uint8)
    bv = b.view(f"u{b.dtype.itemsize}") if b.dtype.kind != "c" else b.view(np.uint8)
    if a.dtype.kind == "c":
        return np.array_equal(a, b, equal_nan=True)
    return bool(np.all((av == bv) | (nan_a & nan_b)))


def check(text, *args, opcode=None, exact=True, xla=True, atol=None, fallbacks=0, verify=True):
    """gpu vs cpu (bit-exact unless ``exact=False``) and gpu vs XLA.

    ``fallbacks=0`` runs the gpu backend with ``fallback=False`` (an op without a
    kernel raises). ``xla=True`` compares with XLA:CPU when it can run the module;
    ``xla="required"``: XLA:CPU must run it (the check is never silently skipped).
    ``verify=False``: a module XLA's verifier refuses (an op hloref evaluates beyond
    XLA, such as complex cbrt)."""
    m = hloref.parse(text)
    cpu = hloref.evaluate(m, *args, verify=verify)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        gpu = hloref.evaluate(m, *args, backend="gpu", fallback=fallbacks != 0, verify=verify)
    report = hloref.gpu.last_report
    assert report.total == fallbacks, str(report)
    fallback_warnings = [w for w in caught if "runs on the CPU" in str(w.message)]
    assert len(fallback_warnings) == len(report.counts)
    if exact:
        assert bits_equal(gpu, cpu), f"gpu {gpu!r}\ncpu {cpu!r}"
    else:
        verdict = compare_values(gpu, cpu, opcode=opcode, atol=atol)
        assert verdict.ok, str(verdict)
    if xla == "required":
        assert HAVE_XLA, "XLA:CPU (jaxlib) is not available"
        ref = run_hlo(text, *args)
        verdict = compare_values(ref, gpu, opcode=opcode, atol=atol)
        assert verdict.ok, str(verdict)
    elif xla and HAVE_XLA:
        try:
            ref = run_hlo(text, *args)
        except (OracleUnsupported, OracleError):
            return gpu  # XLA:CPU cannot run this module (type or opcode it lacks)
        verdict = compare_values(ref, gpu, opcode=opcode, atol=atol)
        assert verdict.ok, str(verdict)
    return gpu


def check_devices(text, *args):
    """The gpu backend (no fallback) on a several-device module against the cpu
    backend's simulation, device by device, bit for bit; returns the gpu's values."""
    m = hloref.parse(text)
    cpu = hloref.evaluate(m, *args)
    gpu = hloref.evaluate(m, *args, backend="gpu", fallback=False)
    assert hloref.gpu.last_report.total == 0
    assert len(gpu) == len(cpu)
    for g, c in zip(gpu, cpu):
        assert bits_equal(g, c), (g, c)
    return gpu
