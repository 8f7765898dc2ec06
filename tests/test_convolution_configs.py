"""Random convolution configurations against XLA:CPU, bit for bit.

Each case draws the rank (1-3 spatial dims), a permutation of every ``dim_labels``
part, stride, base (lhs) and window (rhs) dilation, negative and positive padding,
reversal, and feature or batch groups. Operands hold small integers, so every sum is
exact in f32/f64 and both implementations must agree exactly whatever their
summation order; s32 checks the integer path and bf16 -> f32 the widening path.
"""

from __future__ import annotations

import random

import ml_dtypes
import numpy as np
import pytest

from hlo_builders import module, run_both, shape_text

_DTYPES = {"f32": np.float32, "s32": np.int32, "bf16": ml_dtypes.bfloat16, "f64": np.float64}


def _config(seed: int):
    rng = random.Random(seed)
    nsp = rng.choice([1, 2, 2, 3])
    g = rng.choice([1, 1, 2])
    bg = 1 if g > 1 else rng.choice([1, 1, 2])  # XLA allows one of the two above 1
    ci, op_ = rng.randint(1, 3), rng.randint(1, 3)
    c, o, n = ci * g, op_ * g * bg, rng.randint(1, 3) * bg
    spatial = [rng.randint(1, 6) for _ in range(nsp)]
    window = [dict(size=rng.randint(1, 3), stride=rng.randint(1, 3), lhs=rng.randint(1, 3),
                   rhs=rng.randint(1, 2), lo=rng.randint(-2, 2), hi=rng.randint(-2, 2),
                   rev=rng.randint(0, 1)) for _ in range(nsp)]
    out_spatial = []
    for size, w in zip(spatial, window):  # the convolution shape rule, by hand
        full = (size - 1) * w["lhs"] + 1 + w["lo"] + w["hi"]
        span = (w["size"] - 1) * w["rhs"] + 1
        out_spatial.append((full - span) // w["stride"] + 1 if full >= span else 0)
    digits = [str(i) for i in range(nsp)]
    labels = [list("bf") + digits, list("io") + digits, list("bf") + digits]
    for part in labels:
        rng.shuffle(part)
    inp, ker, out = labels
    sp = dict(zip(digits, spatial))
    ld = [dict(b=n, f=c, **sp)[ch] for ch in inp]
    rd = [dict(i=ci, o=o, **dict(zip(digits, (w["size"] for w in window))))[ch] for ch in ker]
    od = [dict(b=n // bg, f=o, **dict(zip(digits, out_spatial)))[ch] for ch in out]

    def field(key):
        return "x".join(str(w[key]) for w in window)

    pads = "x".join(f"{w['lo']}_{w['hi']}" for w in window)
    text_window = (f"size={field('size')} stride={field('stride')} pad={pads} "
                   f"lhs_dilate={field('lhs')} rhs_dilate={field('rhs')} rhs_reversal={field('rev')}")
    t = rng.choice(["f32", "f32", "s32", "bf16", "f64"])
    ot = "f32" if t == "bf16" else t
    text = module(f"  a = {shape_text(t, ld)} parameter(0)\n  b = {shape_text(t, rd)} parameter(1)\n"
                  f"  ROOT c = {shape_text(ot, od)} convolution(a, b), window={{{text_window}}}, "
                  f"dim_labels={''.join(inp)}_{''.join(ker)}->{''.join(out)}, "
                  f"feature_group_count={g}, batch_group_count={bg}")
    values = np.random.default_rng(seed)
    a = values.integers(-4, 5, ld).astype(_DTYPES[t])
    b = values.integers(-4, 5, rd).astype(_DTYPES[t])
    return text, a, b


@pytest.mark.parametrize("seed", range(48))
def test_random_convolution_matches_xla_exactly(seed):
    text, a, b = _config(seed)
    ours, theirs = run_both(text, a, b)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype, text
    np.testing.assert_array_equal(np.asarray(ours, np.float64), np.asarray(theirs, np.float64),
                                  err_msg=text)
