"""Arguments for generated modules: ``inputs_for(module)`` (seeded, so shrinking acts
on the seed) and ``random_inputs``, which honour the module's ``fuzz_hints``; the
builder's random constants come from ``random_array`` too."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from hloref.ir import Module
from hloref.shapes import ArrayShape, Shape, TupleShape
from hloref.types import ElementType

#: ``inputs_for`` modes: ``normal`` (finite, no subnormals, moderate magnitudes),
#: ``wide`` (integers over their whole range, floats over many binades),
#: ``special`` (±0, subnormals, ±inf, NaN, extremes, integer min/max mixed in).
INPUT_MODES = ("normal", "wide", "special")


def _float_info(et: ElementType):
    return ml_dtypes.finfo(et.dtype) if et.bits < 32 or et.dtype.type.__module__.startswith(
        "ml_dtypes") else np.finfo(et.dtype)


def _flush(values: np.ndarray, et: ElementType) -> np.ndarray:
    tiny = float(_float_info(et).smallest_normal)
    return np.where(np.abs(values) < tiny, 0.0, values)


def random_array(shape: ArrayShape, rng: np.random.Generator, mode: str, hint=None):
    """An array of ``shape`` in ``mode`` (``INPUT_MODES``), shaped by a parameter's
    ``fuzz_hints`` role (``spd``, ``triangular``, ``positive``, ``index``)."""
    et = shape.element_type
    dims = tuple(max(d, 0) for d in shape.dims)
    n = math.prod(dims)
    if hint == "spd" and et.is_float:
        m = dims[-1]
        lead = dims[:-2]
        x = rng.standard_normal(lead + (m, m))
        a = x @ np.swapaxes(x, -1, -2) + m * np.eye(m)
        return a.astype(et.dtype)
    if hint == "triangular" and et.is_float:
        m = dims[-1]
        a = rng.uniform(-1, 1, dims) * 0.5
        a = a + np.eye(m) * np.where(rng.random(dims[:-1]) < 0.5, -2.0, 2.0)[..., None]
        return a.astype(et.dtype)
    if hint == "positive" and et.is_float:
        return (np.abs(rng.standard_normal(dims)) + 0.5).astype(et.dtype)
    if hint == "index" and et.is_integer:
        lo = 0 if et.is_unsigned_integer else -3
        hi = min(et.max_value, 12)
        vals = rng.integers(lo, hi, size=dims, endpoint=True)
        if mode == "special":
            pool = np.array([et.min_value, et.max_value, 0, 1], dtype=np.int64) \
                if et.bits < 64 else np.array([0, 1, 2**31 - 1], dtype=np.int64)
            vals = np.where(rng.random(dims) < 0.3, rng.choice(pool, size=dims), vals)
        return vals.astype(et.dtype)
    if et.is_pred:
        return rng.random(dims) < 0.5
    if et.is_integer:
        if mode == "normal":
            lo, hi = max(et.min_value, -8), min(et.max_value, 8)
            return rng.integers(lo, hi, size=dims, endpoint=True).astype(et.dtype)
        vals = rng.integers(et.min_value, et.max_value, size=dims, endpoint=True,
                            dtype=np.int64 if et.kind == "sint" or et.bits < 64 else np.uint64)
        if mode == "special":
            pool = [et.min_value, et.max_value, 0, 1]
            if et.is_signed_integer:
                pool.append(-1)
            choice = rng.integers(0, len(pool), size=dims)
            pick = np.array(pool, dtype=np.uint64 if et.kind == "uint" and et.bits == 64
                            else np.int64)[choice]
            vals = np.where(rng.random(dims) < 0.4, pick, vals)
        return vals.astype(et.dtype)
    if et.is_complex:
        scale = 1.0 if mode == "normal" else 8.0
        v = (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)) * scale
        return v.astype(et.dtype)
    info = _float_info(et)
    if et.name == "f8e8m0fnu":
        e = np.round(rng.standard_normal(dims) * (2 if mode == "normal" else 20))
        v = np.exp2(np.clip(e, -126, 127))
        if mode == "special":
            v = np.where(rng.random(dims) < 0.1, np.nan, v)
        return v.astype(et.dtype)
    if mode == "normal":
        v = rng.standard_normal(dims) * rng.choice([1.0, 1.0, 4.0])
    else:
        expo = rng.uniform(np.log2(float(info.smallest_normal)), np.log2(float(info.max)) - 1,
                           size=dims)
        v = np.exp2(expo) * np.where(rng.random(dims) < 0.5, -1, 1)
        if et.float_format.signed is False:
            v = np.abs(v)
    v = _flush(np.asarray(v, np.float64), et).astype(et.dtype)
    if mode == "special" and n:
        specials = [0.0, -0.0, float(info.max), -float(info.max), float(info.smallest_normal),
                    float(info.smallest_subnormal), 1.0, -1.0]
        if et.float_format.has_inf:
            specials += [np.inf, -np.inf]
        if et.float_format.has_nan:
            specials += [np.nan]
        sp = np.asarray(rng.choice(np.array(specials, np.float64), size=dims)).astype(et.dtype)
        v = np.where(rng.random(dims) < 0.3, sp, v)
    return np.asarray(v).astype(et.dtype)


def random_inputs(module: Module, seed: int, mode: str = "normal") -> list:
    """Arguments for the module's entry parameters (``fuzz_hints`` honoured)."""
    if mode not in INPUT_MODES:
        raise InvalidArgument(f"mode={mode!r} must be one of {INPUT_MODES}")
    rng = np.random.default_rng(seed)
    hints = getattr(module, "fuzz_hints", {}) or {}
    out = []
    for p in module.entry.parameters:
        out.append(_value(p.shape, rng, mode, hints.get(p.parameter_number)))
    return out


def _value(shape: Shape, rng, mode, hint):
    if isinstance(shape, TupleShape):
        return tuple(_value(s, rng, mode, None) for s in shape.elements)
    # always an ndarray (numpy hands back scalars for 0-d draws), of the exact dtype
    return np.asarray(random_array(shape, rng, mode, hint)).astype(shape.element_type.dtype)


def inputs_for(module: Module, *, modes=("normal", "normal", "normal", "wide", "special")
               ) -> st.SearchStrategy[list]:
    """Seeded arguments for ``module``'s entry computation: a mode from ``modes``
    (``INPUT_MODES``; repeat a mode to weight it) and a seed are drawn, the arrays
    are made with numpy from them (so shrinking acts on the seed, not on bytes)."""
    if not isinstance(module, Module):
        raise InvalidArgument(f"inputs_for expects an hloref Module, got {type(module).__name__}")
    modes = tuple(modes)
    if not modes or any(m not in INPUT_MODES for m in modes):
        raise InvalidArgument(f"modes={modes!r} must be a non-empty subset of {INPUT_MODES}")
    return _args(module, modes)


_SEEDS = st.integers(0, 2**32 - 1)


@st.composite
def _args(draw, module: Module, modes: tuple) -> "Inputs":
    # one composite for every module: building it per call cost Hypothesis an
    # inspect.getsource of its body each time (about 12 % of drawing a program)
    mode = draw(st.sampled_from(modes))
    seed = draw(_SEEDS)
    return Inputs(random_inputs(module, seed, mode), mode=mode, seed=seed)


class Inputs(list):
    """The argument list ``inputs_for`` draws, with the ``mode`` and ``seed`` it came from."""

    def __init__(self, values, *, mode: str, seed: int):
        super().__init__(values)
        self.mode = mode
        self.seed = seed
