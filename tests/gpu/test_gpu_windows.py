"""reduce-window and select-and-scatter on the GPU backend (fallback disabled) against the
cpu backend (bit for bit) and XLA:CPU, over windows with strides, padding (negative
too), base and window dilation, in the element types the cpu backend supports."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import hloref
from hloref.fuzz.compare import accumulation_atol
from hloref.types import element_type

from gpu_check import check, module, values

REDUCER = """
red {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT r = {t}[] {op}(a, b)
}}
"""

#: (operand dims, result dims, window)
WINDOWS = [
    ("[1,4,6,1]", "[1,2,3,1]", "size=1x2x2x1 stride=1x2x2x1"),          # 2x2 pooling
    ("[5,6]", "[5,6]", "size=3x3 pad=1_1x1_1"),                          # same-size, padded
    ("[5,6]", "[4,3]", "size=2x2 stride=2x2 pad=-1_1x0_2 lhs_dilate=2x1 rhs_dilate=1x2"),
    ("[7]", "[4]", "size=3 stride=2 pad=2_1"),
]

REDUCE_TYPES = {
    "add": ["f32", "bf16", "s32", "u8", "pred"],
    "maximum": ["f32", "f8e4m3fn", "s8", "f64", "f16"],
    "minimum": ["bf16", "u16"],
    "multiply": ["s32"],
    "and": ["pred"],
    "or": ["u32"],
}
INITS = {"add": 0, "multiply": 1, "maximum": -np.inf, "minimum": np.inf, "and": 1, "or": 0}


def _dims(text):
    return tuple(int(v) for v in text.strip("[]").split(","))


@pytest.mark.parametrize("op", list(REDUCE_TYPES))
def test_reduce_window(op):
    for t in REDUCE_TYPES[op]:
        et = element_type(t)
        init = INITS[op]
        if et.is_integer and op in ("maximum", "minimum"):
            init = et.min_value if op == "maximum" else et.max_value
        if et.is_float and op in ("maximum", "minimum") and np.isnan(
                np.asarray(init).astype(et.dtype).astype(np.float32)):  # no infinities (f8e4m3fn)
            fmax = float(ml_dtypes.finfo(et.dtype).max)
            init = -fmax if op == "maximum" else fmax
        for xd, od, win in WINDOWS:
            x = values(t, _dims(xd), kind="small" if op == "multiply" else "normal")
            text = module([f"{t}{xd}", f"{t}[]"], f"reduce-window(p0, p1), window={{{win}}}, to_apply=red",
                          f"{t}{od}", extra=REDUCER.format(t=t, op=op))
            atol = None
            if et.is_float and op == "add":  # XLA:CPU sums in another order (and in bf16)
                xf = x.astype(np.float64)
                n = int(np.prod([int(v) for v in win.split()[0][5:].split("x")]))
                atol = accumulation_atol(n, n * np.abs(xf[np.isfinite(xf)]).max(), et)
            check(text, x, np.asarray(init).astype(x.dtype), opcode="reduce-window",
                  xla="required", atol=atol)


def test_reduce_window_init_added_once():
    # padding is skipped, not filled with the init value (the cpu backend's and XLA's rule)
    text = module(["s32[4]", "s32[]"], "reduce-window(p0, p1), window={size=3 pad=1_1}, to_apply=red",
                  "s32[4]", extra=REDUCER.format(t="s32", op="add"))
    out = hloref.evaluate(text, np.array([1, 2, 3, 4], np.int32), np.int32(100), backend="gpu",
                          fallback=False)
    assert out.tolist() == [103, 106, 109, 107]
    check(text, np.array([1, 2, 3, 4], np.int32), np.int32(100), xla="required")


SELECT = """
sel {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT c = pred[] compare({args}), direction={d}{extra}
}}
"""

#: (operand dims, source dims, window)
SAS_WINDOWS = [
    ("[4,6]", "[2,3]", "size=2x2 stride=2x2"),                   # max-pool gradient
    ("[4,6]", "[4,3]", "size=3x3 stride=1x2 pad=1_1x1_1"),       # overlapping windows
    ("[5]", "[3]", "size=2 stride=2 pad=0_1"),
]
#: (select direction, compare operands, comparison type)
SELECTS = [("GE", "a, b", ""), ("LE", "b, a", ""), ("GT", "a, b", ", type=TOTALORDER"),
           ("LT", "a, b", "")]


@pytest.mark.parametrize("t", ["f32", "bf16", "s32", "f64", "u8"])
def test_select_and_scatter(t):
    for d, args, extra in SELECTS:
        if extra and not element_type(t).is_float:
            continue
        for xd, sd, win in SAS_WINDOWS:
            x = values(t, _dims(xd), kind="small")  # small values: ties in windows
            src = values(t, _dims(sd))
            if element_type(t).is_float:
                x = np.round(values(t, _dims(xd), kind="unit").astype(np.float32) * 2).astype(x.dtype)
            extra_text = REDUCER.format(t=t, op="add") + SELECT.format(t=t, args=args, d=d, extra=extra)
            text = module([f"{t}{xd}", f"{t}{sd}", f"{t}[]"],
                          f"select-and-scatter(p0, p1, p2), window={{{win}}}, select=sel, scatter=red",
                          f"{t}{xd}", extra=extra_text)
            check(text, x, src, np.asarray(1).astype(src.dtype), opcode="select-and-scatter",
                  xla="required")


def test_select_and_scatter_by_hand():
    # windows [1,7,7] and [7,7,2] both choose element 1 (a tie keeps the first: GE is
    # true for equal values) and add up; [7,2,0] chooses element 2
    extra = REDUCER.format(t="s32", op="add") + SELECT.format(t="s32", args="a, b", d="GE", extra="")
    text = module(["s32[5]", "s32[3]", "s32[]"],
                  "select-and-scatter(p0, p1, p2), window={size=3 stride=1}, select=sel, scatter=red",
                  "s32[5]", extra=extra)
    out = hloref.evaluate(text, np.array([1, 7, 7, 2, 0], np.int32), np.array([10, 20, 30], np.int32),
                          np.int32(5), backend="gpu", fallback=False)
    assert out.tolist() == [5, 35, 35, 5, 5]


GENERAL_SAS = """
sel {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ge = pred[] compare(a, b), direction=GE
  isnan = pred[] compare(a, a), direction=NE
  ROOT r = pred[] or(ge, isnan)
}
sc {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  s = f32[] add(a, b)
  h = f32[] constant(0.5)
  ROOT r = f32[] multiply(s, h)
}
"""


def test_select_and_scatter_general_computations():
    # select and scatter that are not one op run compiled; scatter (a + b) / 2 is not
    # associative, so the source order per element matters
    text = module(["f32[4,6]", "f32[4,3]", "f32[]"],
                  "select-and-scatter(p0, p1, p2), window={size=3x3 stride=1x2 pad=1_1x1_1}, "
                  "select=sel, scatter=sc", "f32[4,6]", extra=GENERAL_SAS)
    x = np.round(values("f32", (4, 6), kind="unit") * 2).astype(np.float32)
    check(text, x, values("f32", (4, 3), kind="unit"), np.float32(1), xla="required")


ADD_COPY = """
red {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  s = {t}[] add(a, b)
  ROOT r = {t}[] copy(s)
}}
"""


@pytest.mark.parametrize("t", ["bf16", "f16", "s16"])
def test_reduce_window_general_reducer(t):
    # copy(add) is not recognised as one op: the masked pairwise tree of the cpu backend,
    # each step rounded to the type, padding and holes skipped
    et = element_type(t)
    for xd, od, win in WINDOWS:
        x = values(t, _dims(xd), kind="unit" if et.is_float else "small")
        text = module([f"{t}{xd}", f"{t}[]"], f"reduce-window(p0, p1), window={{{win}}}, to_apply=red",
                      f"{t}{od}", extra=ADD_COPY.format(t=t))
        atol = None
        if et.is_float:  # XLA:CPU adds in another order (each step rounded)
            n = int(np.prod([int(v) for v in win.split()[0][5:].split("x")]))
            atol = accumulation_atol(n, n * np.abs(x.astype(np.float64)).max(), et)
        check(text, x, np.asarray(0.25 if et.is_float else 3).astype(x.dtype),
              opcode="reduce-window", xla="required", atol=atol)


ARGMAX_POOL = """HloModule p
red {
  v0 = f32[] parameter(0)
  i0 = s32[] parameter(1)
  v1 = f32[] parameter(2)
  i1 = s32[] parameter(3)
  gt = pred[] compare(v0, v1), direction=GT
  isnan = pred[] compare(v0, v0), direction=NE
  first = pred[] or(gt, isnan)
  eq = pred[] compare(v0, v1), direction=EQ
  lt = pred[] compare(i0, i1), direction=LT
  tie = pred[] and(eq, lt)
  pick = pred[] or(first, tie)
  v = f32[] select(pick, v0, v1)
  i = s32[] select(pick, i0, i1)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
ENTRY e {
  x = f32[5,6] parameter(0)
  idx = s32[5,6] iota(), iota_dimension=1
  lo = f32[] constant(-inf)
  zero = s32[] constant(-1)
  ROOT r = (f32[3,3], s32[3,3]) reduce-window(x, idx, lo, zero), window={size=3x2 stride=2x2 pad=1_1x0_0}, to_apply=red
}
"""


def test_reduce_window_variadic_argmax_pooling():
    x = np.round(values("f32", (5, 6), kind="unit") * 3).astype(np.float32)  # ties
    v, i = check(ARGMAX_POOL, x, xla="required")
    # by hand: the max of each window, and the lowest column holding it
    for r in range(3):
        for c in range(3):
            rows = slice(max(2 * r - 1, 0), min(2 * r + 2, 5))
            win = x[rows, 2 * c:2 * c + 2]
            if np.isnan(win).any():
                continue
            assert v[r, c] == win.max()
            assert i[r, c] == 2 * c + int(np.nonzero((win == win.max()).any(axis=0))[0][0])


SCAN = """HloModule sc
f {
  a = {ty}[3] parameter(0)
  c = {ty}[3] parameter(1)
  s = {ty}[3] add(a, c)
  m = {ty}[3] maximum(a, c)
  ROOT t = ({ty}[3], {ty}[3]) tuple(s, m)
}
ENTRY main {
  x = {ty}[4,3] parameter(0)
  c = {ty}[3] parameter(1)
  ROOT s = ({ty}[4,3], {ty}[3]) scan(x, c), to_apply=f, dimensions={0}, num_carries=1{rev}
}
"""


@pytest.mark.parametrize("t", ["f32", "s32", "bf16"])
@pytest.mark.parametrize("reverse", [False, True])
def test_scan(t, reverse):
    text = SCAN.replace("{ty}", t).replace("{rev}", ", is_reverse=true" if reverse else "")
    x, c = values(t, (4, 3)), values(t, (3,))
    ys, carry = check(text, x, c, xla="required")
    # by hand: output i is x[i] + the carry before step i; the carry a running maximum
    order = range(3, -1, -1) if reverse else range(4)
    run = c.astype(np.float64)
    for i in order:
        if t == "s32":
            wrapped = (x[i].astype(np.int64) + run.astype(np.int64)).astype(np.int32)  # s32 wraps
            assert np.array_equal(ys[i], wrapped)
        run = np.fmax(x[i].astype(np.float64), run) if t != "s32" else np.maximum(x[i], run)


def _cvalues(t, dims, seed):
    rng = np.random.default_rng(seed)
    n = int(np.prod(dims))
    v = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    v[: n // 3] = np.round(v[: n // 3].real)  # ties of real parts, zero imaginary parts
    return v.astype(np.complex64 if t == "c64" else np.complex128).reshape(dims)


@pytest.mark.parametrize("t", ["c64", "c128"])
@pytest.mark.parametrize("op", ["add", "multiply", "maximum", "minimum"])
def test_reduce_window_complex(t, op):
    """add/multiply accumulate in c128 parts (within the accumulation bound of the cpu
    and XLA:CPU); maximum/minimum (lexicographic) run the compiled tree, exact."""
    for k, (xd, od, win) in enumerate(WINDOWS):
        x = _cvalues(t, _dims(xd), k) * (0.7 if op == "multiply" else 1)
        init = np.asarray({"add": 0.5 - 1j, "multiply": 1 + 0.25j, "maximum": -50,
                           "minimum": 50}[op]).astype(x.dtype)
        text = module([f"{t}{xd}", f"{t}[]"], f"reduce-window(p0, p1), window={{{win}}}, "
                      "to_apply=red", f"{t}{od}", extra=REDUCER.format(t=t, op=op))
        n = int(np.prod([int(v) for v in win.split()[0][5:].split("x")])) + 1
        mag = (np.abs(x.astype(np.complex128)).max() + 1.25) ** (n if op == "multiply" else 1)
        atol = accumulation_atol(2 * n, 2 * n * mag, element_type(t)) \
            if op in ("add", "multiply") else None
        # XLA:CPU has no complex maximum/minimum: those against the cpu backend
        out = check(text, x, init, opcode="reduce-window", exact=atol is None, atol=atol,
                    xla="required" if atol is not None else False)
        if k == 3:  # by hand, the 1-D window: size 3, stride 2, padding 2 low, 1 high
            xp = [None, None] + list(x.astype(np.complex128)) + [None]
            for o in range(4):
                win_vals = [v for v in xp[2 * o: 2 * o + 3] if v is not None]
                if op == "add":
                    want = sum(win_vals) + init
                elif op == "multiply":
                    want = np.prod(win_vals) * init
                else:
                    key = sorted(win_vals + [init], key=lambda z: (z.real, z.imag))
                    want = key[-1] if op == "maximum" else key[0]
                np.testing.assert_allclose(out[o], want, rtol=1e-5)


CSAS = """
sel {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ra = {p}[] real(a)
  rb = {p}[] real(b)
  ROOT c = pred[] compare(ra, rb), direction=GE
}}
red {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT r = {t}[] add(a, b)
}}
"""


@pytest.mark.parametrize("t", ["c64", "c128"])
def test_select_and_scatter_complex(t):
    # select by the real part (ties keep the first), scatter adds: exact (c64 parts add
    # in f32 like the cpu's numpy)
    p = "f32" if t == "c64" else "f64"
    for k, (xd, sd, win) in enumerate(SAS_WINDOWS):
        x, src = _cvalues(t, _dims(xd), 10 + k), _cvalues(t, _dims(sd), 20 + k)
        text = module([f"{t}{xd}", f"{t}{sd}", f"{t}[]"],
                      f"select-and-scatter(p0, p1, p2), window={{{win}}}, select=sel, "
                      "scatter=red", f"{t}{xd}", extra=CSAS.format(t=t, p=p))
        init = np.asarray(1 - 1j).astype(x.dtype)
        out = check(text, x, src, init, opcode="select-and-scatter", xla="required")
        if k == 2:  # by hand: size 2, stride 2, padding 0 low 1 high over 5 elements
            want = np.full(5, init, np.complex128)
            for s_, start in enumerate((0, 2, 4)):
                cands = [j for j in range(start, min(start + 2, 5))]
                best = cands[0]
                for j in cands[1:]:
                    if not x[best].real >= x[j].real:
                        best = j
                want[best] += src[s_]
            np.testing.assert_allclose(out, want, rtol=1e-6)
