"""Shared helpers for the differential op tests: single-op HLO module text, input
generators per element type, ``run_both`` (hloref and XLA:CPU on the same module),
and the list of deliberate differences between hloref and XLA:CPU.

The module text is plain HLO; every builder returns text that both hloref's parser
and XLA's ``hlo_module_from_text`` accept.
"""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np

import hloref
from hloref.fuzz.compare import accumulation_atol, compare_values  # noqa: F401 (re-export)
from hloref.types import element_type

__all__ = [
    "INT_TYPES", "SINT_TYPES", "UINT_TYPES", "STD_FLOATS", "F8_TYPES", "NARROW_FLOATS",
    "FLOAT_TYPES", "COMPLEX_TYPES", "ALL_TYPES", "ORACLE_TYPES", "dtype", "et",
    "shape_text", "module", "unary_module", "binary_module", "run_both", "run_hloref",
    "run_xla", "values_for", "XLA_DIFFERS", "all_bit_patterns", "assert_match", "KNOWN_DIFFERENCES",
    "from_bits",
]

SINT_TYPES = ("s2", "s4", "s8", "s16", "s32", "s64")
UINT_TYPES = ("u2", "u4", "u8", "u16", "u32", "u64")
INT_TYPES = SINT_TYPES + UINT_TYPES
STD_FLOATS = ("f16", "bf16", "f32", "f64")
F8_TYPES = ("f8e5m2", "f8e4m3", "f8e4m3fn", "f8e4m3b11fnuz", "f8e5m2fnuz", "f8e4m3fnuz",
            "f8e3m4")
NARROW_FLOATS = F8_TYPES + ("f4e2m1fn", "f8e8m0fnu")
FLOAT_TYPES = STD_FLOATS + NARROW_FLOATS
COMPLEX_TYPES = ("c64", "c128")
#: Every element type the XLA oracle accepts (s1/u1 are tested by hand).
ORACLE_TYPES = ("pred",) + INT_TYPES + FLOAT_TYPES + COMPLEX_TYPES
ALL_TYPES = ORACLE_TYPES + ("s1", "u1")

#: Deliberate differences between hloref and XLA:CPU (jaxlib 0.10.2). Each entry:
#: (opcode, element types, what XLA:CPU does, what hloref does and why). Tests for
#: these assert hloref's documented behaviour against hand-derived values and record
#: XLA's behaviour separately (tests/test_semantics_edge_cases.py).
KNOWN_DIFFERENCES: list[tuple[str, str, str, str]] = [
    ("any float op", "f16/f32/f64/bf16/c64/c128",
     "XLA:CPU flushes subnormal inputs and results to zero (FTZ/DAZ at run time)",
     "hloref keeps subnormals (IEEE); compare_values treats subnormal vs 0 as equal and the "
     "tests draw inputs away from subnormals"),
    ("transcendentals", "f32 and narrower",
     "XLA:CPU uses polynomial approximations with multi-ULP error",
     "hloref computes in f64 and rounds once (correctly rounded nearly always); compared "
     "with the per-opcode ULP budgets of fuzz/compare.py"),
    ("popcnt", "s4",
     "XLA:CPU counts the bits of the sign-extended byte: popcnt(s4 -8) = 5, popcnt(-1) = 8",
     "hloref counts the 4 bits of the type (operation_semantics §PopulationCount: the number "
     "of bits set in each element), popcnt(-8) = 1, popcnt(-1) = 4"),
    ("power", "integer types",
     "XLA:CPU's integer pow only looks at the low 6 bits of the exponent (an unrolled "
     "6-step square-and-multiply): 0^64 = 1, 25^455 (s64) = 25^7",
     "hloref computes the exact power by squaring with wrap-around (HloEvaluator's rule), "
     "0^64 = 0; exponents >= 64 are tested against Python's pow(x, y, 2**bits)"),
    ("abs/log/sqrt/sine/divide/... on complex", "c64/c128",
     "XLA:CPU's complex functions do not follow C99 Annex G for inf/NaN components (e.g. "
     "abs(inf+nan*i) = nan, (nan+inf*i)/w = inf) and overflow for huge magnitudes (rsqrt)",
     "hloref uses numpy's c128 functions (C99 special values: abs(inf+nan*i) = inf); "
     "complex inputs against XLA are finite and of moderate magnitude"),
    ("popcnt/abs/transcendental on f8e8m0fnu 0x00", "f8e8m0fnu",
     "2^-127 is an f32 subnormal, flushed to 0 by XLA:CPU before computing (then 0 -> NaN)",
     "hloref decodes it exactly; f8e8m0fnu inputs against XLA exclude 0x00, and binary ops "
     "keep to 2^-60..2^60 so products stay f32 normals"),
    ("convert", "f4e2m1fn -> every integer type",
     "XLA:CPU converts +-6.0 (f4e2m1fn's largest value) to the integer type's max/min "
     "(s8: 127, u4: 15), as if it had overflowed",
     "hloref truncates: 6.0 -> 6 (it is in range; XLA's own float->int rule is NaN->0, "
     "saturate only out-of-range values, truncate)"),
    ("compare TOTALORDER", "f8e4m3fnuz/f8e5m2fnuz/f8e4m3b11fnuz",
     "XLA:CPU sorts the single NaN (0x80) below every other value",
     "hloref now matches (fixed: it used to sort 0x80 just below +0, as HLO_SURFACE §3.3 said "
     "for HloEvaluator); 0x80 decodes as a negative NaN, so -NaN-first agrees with the docs"),
    ("clamp/maximum/minimum", "floats",
     "XLA:CPU may return a NaN with the other sign bit than the NaN operand",
     "hloref returns the operand NaN; compare_values ignores NaN sign/payload"),
    ("dot/reduce/convolution", "floats",
     "XLA:CPU accumulates in the element type (or f32) in an implementation-defined order",
     "hloref accumulates in f64 and rounds once; compared with accumulation_atol"),
]


#: (opcode, element type) leaves the differential tests do not compare with XLA:CPU
#: because of a KNOWN_DIFFERENCES entry; the edge-case tests pin hloref's value by hand.
XLA_DIFFERS: dict[tuple[str, str], str] = {
    ("popcnt", "s4"): "XLA:CPU counts the 8 bits of the sign-extended storage byte "
                      "(popcnt(s4 -8) = 5); hloref counts the type's 4 bits (docs §PopulationCount)",
}


def et(name: str):
    return element_type(name)


def dtype(name: str) -> np.dtype:
    return element_type(name).dtype


def shape_text(t: str, dims) -> str:
    return f"{t}[{','.join(str(d) for d in dims)}]"


def module(body: str, *, name: str = "m", computations: str = "") -> str:
    """A module with extra ``computations`` and an ``ENTRY main { body }``."""
    return f"HloModule {name}\n\n{computations}\nENTRY main {{\n{body}\n}}\n"


def unary_module(opcode: str, in_t: str, dims, out_t: str | None = None, attrs: str = "") -> str:
    out_t = out_t or in_t
    a = f", {attrs}" if attrs else ""
    return module(f"  x = {shape_text(in_t, dims)} parameter(0)\n"
                  f"  ROOT r = {shape_text(out_t, dims)} {opcode}(x){a}")


def binary_module(opcode: str, in_t: str, dims, out_t: str | None = None, attrs: str = "",
                  rhs_t: str | None = None) -> str:
    out_t = out_t or in_t
    rhs_t = rhs_t or in_t
    a = f", {attrs}" if attrs else ""
    return module(f"  x = {shape_text(in_t, dims)} parameter(0)\n"
                  f"  y = {shape_text(rhs_t, dims)} parameter(1)\n"
                  f"  ROOT r = {shape_text(out_t, dims)} {opcode}(x, y){a}")


def run_hloref(text: str, *args):
    return hloref.evaluate(text, *args)


def run_xla(text: str, *args):
    from hloref.fuzz.oracles.xla import run_hlo
    return run_hlo(text, *args)


def run_both(text: str, *args):
    """(hloref value, XLA:CPU value) of the module on ``args``."""
    return run_hloref(text, *args), run_xla(text, *args)


def assert_match(text: str, *args, opcode: str | None = None, atol=None, tolerance=None):
    """Run both and assert ``compare_values`` agrees; returns (hloref, xla)."""
    ours, theirs = run_both(text, *args)
    verdict = compare_values(theirs, ours, opcode=opcode, atol=atol, tolerance=tolerance)
    assert verdict.ok, f"{verdict}\n{text}"
    return ours, theirs


# ------------------------------------------------------------------ values


def from_bits(bits, t: str) -> np.ndarray:
    return np.asarray(bits, element_type(t).bits_dtype).view(dtype(t))


def all_bit_patterns(t: str) -> np.ndarray:
    """Every value of a type of at most 8 bits (narrow floats: every bit pattern)."""
    e = element_type(t)
    if e.is_float:
        n = 1 << e.bits
        return from_bits(np.arange(n, dtype=np.uint64), t)
    if e.is_pred:
        return np.array([False, True])
    return np.arange(int(e.min_value), int(e.max_value) + 1).astype(e.dtype)


def _int_specials(t: str) -> list[int]:
    e = element_type(t)
    lo, hi = int(e.min_value), int(e.max_value)
    vals = {0, 1, lo, hi, lo + 1, hi - 1, hi // 2, 2, 3}
    if lo < 0:
        vals |= {-1, -2, lo // 2}
    return sorted(v for v in vals if lo <= v <= hi)


def _float_specials(t: str) -> list[float]:
    info = ml_dtypes.finfo(dtype(t)) if t not in ("f32", "f64", "f16") else np.finfo(dtype(t))
    big = float(info.max)
    tiny = float(info.tiny)  # smallest normal
    return [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.5, -0.25, 0.75, 2.0, -3.0,
            big, -big, tiny, -tiny, np.inf, -np.inf, np.nan, -np.nan, 100.0, -7.0, 1e-3]


def values_for(t: str, shape, rng: np.random.Generator, *, domain: str = "any",
               specials: bool = True) -> np.ndarray:
    """Random values of type ``t`` (no subnormals) with special values mixed in.

    ``domain``: ``any`` (wide magnitudes), ``unit`` (|x| < 1), ``small`` (|x| < 8),
    ``positive`` (x > 0), ``ge1`` (x >= 1), ``trig`` (|x| < 100)."""
    e = element_type(t)
    shape = tuple(shape)
    n = int(np.prod(shape, dtype=np.int64))
    if e.is_pred:
        return rng.integers(0, 2, size=shape).astype(bool)
    if e.is_integer:
        lo, hi = int(e.min_value), int(e.max_value)
        if e.bits == 64:
            raw = rng.integers(0, 2**64, size=n, dtype=np.uint64, endpoint=False)
            out = raw.view(np.int64) if lo < 0 else raw
            # mostly small-ish values, some full-range ones
            small = rng.integers(-1000 if lo < 0 else 0, 1000, size=n)
            pick = rng.random(n) < 0.5
            out = np.where(pick, small, out.astype(np.int64) if lo < 0 else out)
            out = out.astype(e.dtype)
        else:
            out = rng.integers(lo, hi + 1, size=n).astype(e.dtype)
        if specials:
            sp = np.array(_int_specials(t), dtype=object)
            k = min(len(sp), n)
            idx = rng.choice(n, size=k, replace=False)
            out[idx] = np.array([int(v) for v in sp[:k]]).astype(e.dtype) if e.bits < 64 else \
                np.array([int(v) for v in sp[:k]], dtype=e.dtype)
        return out.reshape(shape)
    if e.is_complex:
        part = "f32" if t == "c64" else "f64"
        re = values_for(part, shape, rng, domain=domain, specials=specials)
        im = values_for(part, shape, rng, domain=domain, specials=specials)
        return (re.astype(e.dtype) + 1j * im.astype(e.dtype)).astype(e.dtype)
    # real floats
    info = np.finfo(np.float32) if t not in ("f16", "f64") else np.finfo(dtype(t))
    if e.is_narrow_float:
        info = ml_dtypes.finfo(dtype(t))
    tiny, big = float(info.tiny), float(info.max)
    if domain == "unit":
        v = rng.uniform(-0.999, 0.999, n)
    elif domain == "small":
        v = rng.uniform(-8, 8, n)
    elif domain == "positive":
        v = np.exp(rng.uniform(np.log(max(tiny, 1e-30)) / 2, min(np.log(big) / 2, 40), n))
    elif domain == "ge1":
        v = 1 + np.exp(rng.uniform(-10, min(np.log(big) / 2, 40), n))
    elif domain == "trig":
        v = rng.uniform(-100, 100, n)
    else:
        hi_exp = min(np.log2(big) - 1, 60)
        lo_exp = min(max(np.log2(tiny) + 2, -60), hi_exp - 1)
        v = np.exp2(rng.uniform(lo_exp, hi_exp, n)) * rng.choice([-1.0, 1.0], n)
        v = np.where(rng.random(n) < 0.3, np.round(v * 2) / 2, v)  # ties for rounding ops
    if t == "f8e8m0fnu":
        v = np.abs(v)
        v = np.where(v < 2.0**-120, 1.0, v)  # 2^-127 is an f32 subnormal: XLA flushes it
    out = v.astype(np.float64)
    if specials:
        sp = _float_specials(t)
        if domain in ("unit", "small", "trig"):
            sp = [s for s in sp if not np.isfinite(s) or abs(s) < 8] + [np.nan, np.inf, -np.inf]
        k = min(len(sp), n)
        idx = rng.choice(n, size=k, replace=False)
        out[idx] = sp[:k]
        if t == "f8e8m0fnu":
            out = np.where(np.abs(out) < 2.0**-120, 1.0, out)
    out = out.astype(np.float32).astype(dtype(t)) if e.is_narrow_float or t == "bf16" else \
        out.astype(dtype(t))
    # keep subnormals out (XLA:CPU flushes them)
    f = np.abs(out.astype(np.float64))
    if t != "f8e8m0fnu":
        out = np.where((f > 0) & (f < tiny), np.array(tiny, dtype(t)) if not e.is_narrow_float
                       else out.dtype.type(tiny), out)
    return out.astype(dtype(t)).reshape(shape)


def product_pairs(x: np.ndarray, y: np.ndarray):
    """All pairs (x[i], y[j]) as two flat arrays."""
    a, b = np.meshgrid(x.ravel(), y.ravel(), indexing="ij")
    return a.ravel().copy(), b.ravel().copy()


__all__ += ["product_pairs", "itertools", "compare_values", "accumulation_atol"]
