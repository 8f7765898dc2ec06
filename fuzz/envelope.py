"""The numerical envelope: which values may a correct implementation return?

For every floating-point (and complex) output element, the envelope is the range of
values that a correct implementation of the HLO semantics may return on these
inputs, given the freedoms XLA legitimately takes (``Freedoms``; docs/semantics.md,
"The numerical envelope"). A verdict is: inside the envelope or not.

The envelope of an element is the sampled range, widened around the nominal value
by ``widen`` times the largest sampled deviation, plus a floor of the element
type's ULP budget (``compare.DTYPE_ULPS``, the final rounding); where the runs
cluster on at most three values (a coarse grid: bf16 gradients, f8 values), the
sampled range itself is extended by ``widen`` times the deviation on each side.

The runs come from ``sampling.sample``; the freedoms and the sampling policy are in
``freedoms``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from hloref.errors import HloEvalError
from hloref.ir import Module
from hloref.shapes import ArrayShape
from hloref.types import ElementType

from .compare import DTYPE_ULPS, largest_finite, smallest_normal
from .compare import leaves as _leaves
from .freedoms import EnvelopePolicy, Freedoms
from .perturb import Perturber, program_computations
from .rounding import float_type, is_narrow, ulp_at
from .sampling import Sampled, sample

__all__ = ["Freedoms", "EnvelopePolicy", "Envelope", "EnvelopeVerdict", "Perturber", "Sampled",
           "sample", "envelope_of", "program_computations", "confirmed", "MARGINAL_WIDTHS"]


# ---------------------------------------------------------------- the envelope


@dataclass
class _Leaf:
    """One array output: nominal value and its allowed range, element by element."""

    nominal: np.ndarray
    lo: np.ndarray  # f64 (complex: normwise radius in ``hi``, centre in ``lo``)
    hi: np.ndarray
    nan_ok: np.ndarray
    et: ElementType | None
    #: a narrower float type every sampled value is a value of (the leaf carries a
    #: narrow result exactly, e.g. through a widening convert): without excess
    #: precision the oracle's values must be values of it too
    grid: ElementType | None = None
    #: complex: elements where the complex infinity is allowed (C99 G.3: any value
    #: with an infinite part), because the nominal value or a run is one
    inf_ok: np.ndarray | None = None


@dataclass
class EnvelopeVerdict:
    ok: bool
    message: str = ""
    leaf: tuple = ()
    index: tuple | None = None
    expected: object = None  # hloref's nominal value
    actual: object = None
    lo: float | None = None
    hi: float | None = None
    widths: float = 0.0  # how many envelope widths outside (0 inside)
    count: int = 0
    max_position: float = 0.0  # largest |actual - nominal| / half-width over elements
    #: XLA rewrites (``rewrites.REWRITES``: name, source line, instruction) without which
    #: the value would be outside: the runs that took none of them do not reach it
    rewrites: tuple = ()

    def __str__(self) -> str:
        return self.describe()

    def describe(self, ours: str = "hloref", theirs: str = "XLA") -> str:
        """The verdict in words: ``ours`` names the value the envelope is built around
        (``expected``), ``theirs`` the value judged (``actual``; ``fuzz/vocabulary.py``)."""
        if self.ok:
            needed = f"; only with XLA's rewrite {', '.join(self.rewrites)}" \
                if self.rewrites else ""
            return (f"{theirs}'s value is inside the envelope (at most "
                    f"{self.max_position:.2g} of its half-width{needed})")
        where = f" at output {self.leaf}" if self.leaf else ""
        if self.index is None:
            return f"{theirs}'s value is outside the envelope{where}: {self.message}"
        why = f" ({self.message})" if self.message else ""
        return (f"{theirs}'s value is outside the envelope{where}: {self.count} element(s); "
                f"first at {list(self.index)}: {ours} {self.expected!r}, {theirs} "
                f"{self.actual!r}, envelope [{self.lo!r}, {self.hi!r}], {self.widths:.3g} "
                f"envelope widths outside{why}")


class Envelope:
    """Allowed values for each output element of one module on one set of inputs."""

    def __init__(self, nominal, samples: list, policy: EnvelopePolicy,
                 module: Module | None = None, peak: float = 0.0, rewrites: list | None = None):
        """``peak``: ``Sampled.peak``, how close the program's values came to overflowing
        (where they came within :data:`OVERFLOW_REACH` of it, elements the runs left
        without a correct bit may also be NaN or infinite). ``rewrites``: per sample, the
        XLA rewrites it took (``Sampled.rewrites``), to name the ones a verdict needed."""
        self.nominal = nominal
        self.policy = policy
        self._rewrites = list(rewrites or [])
        # the runs are kept only where some took a rewrite (to rebuild the envelope
        # without them), not for every envelope of a large output
        self._plain_args = (samples, module, peak) if any(self._rewrites) else None
        self._plain: "Envelope | None" = None
        self.leaves: dict[tuple, _Leaf] = {}
        sample_leaves = [dict(_leaves(s)) for s in samples]
        grids = _narrow_types(module) if module is not None and \
            not policy.freedoms.excess_precision else []
        for path, nom in _leaves(nominal):
            if not isinstance(nom, np.ndarray):
                continue
            values = [s.get(path) for s in sample_leaves]
            values = [v for v in values if isinstance(v, np.ndarray)]
            for v in values:
                if v.shape != nom.shape:  # a perturbed run must not change a shape: dropping
                    # such runs once collapsed rank-0 dot envelopes to the ULP floor
                    raise HloEvalError(f"envelope: a perturbed run gave output {list(path)} "
                                       f"the shape {list(v.shape)}, the nominal run "
                                       f"{list(nom.shape)} (an hloref bug)")
            self.leaves[path] = leaf = _built_leaf(nom, values, policy,
                                                   overflow_reachable=peak >= OVERFLOW_REACH)
            if leaf.et is not None and not leaf.et.is_complex:
                leaf.grid = _common_grid([nom] + values, leaf.et, grids)

    @classmethod
    def of(cls, sampled, policy: EnvelopePolicy, module: Module | None = None) -> "Envelope":
        """The envelope of a sampling's runs (``sample``'s nominal value, samples, peak)."""
        return cls(sampled.nominal, sampled.samples, policy, module, peak=sampled.peak,
                   rewrites=getattr(sampled, "rewrites", None))

    def check(self, actual, *, stretch: float = 0.0) -> EnvelopeVerdict:
        """Is ``actual`` inside, element by element? ``stretch``: every float element's
        range widened by that many of its own widths on each side (a complex one's
        radius by as many diameters; integers and NaNs as they are), to tell a marginal
        miss (``confirmed``)."""
        a_leaves = dict(_leaves(actual))
        if set(a_leaves) != set(dict(_leaves(self.nominal))):
            return EnvelopeVerdict(False, "the results have different tuple structure")
        worst = 0.0
        for path, leaf in self.leaves.items():
            a = np.asarray(a_leaves[path])
            if a.shape != leaf.nominal.shape:
                return EnvelopeVerdict(False, f"shape {a.shape} vs expected {leaf.nominal.shape}",
                                       leaf=path)
            if a.dtype != leaf.nominal.dtype:
                return EnvelopeVerdict(False, f"dtype {a.dtype} vs expected {leaf.nominal.dtype}",
                                       leaf=path)
            verdict = _check_leaf(leaf, a, self.policy, stretch)
            if not verdict.ok:
                verdict.leaf = path
                return verdict
            worst = max(worst, verdict.max_position)
        return EnvelopeVerdict(True, max_position=worst,
                               rewrites=self._rewrites_needed(actual, stretch))

    def _rewrites_needed(self, actual, stretch: float) -> tuple:
        """The rewrites the runs took, when ``actual`` (inside) is outside the envelope of
        the runs that took none, stretched by ``MARGINAL_WIDTHS`` (fewer runs give a
        narrower envelope: only a value well outside it needed a rewrite); their names,
        sorted, else ``()``."""
        if self._plain_args is None:
            return ()
        taken = sorted(set().union(*self._rewrites))
        if self._plain is None:
            samples, module, peak = self._plain_args
            plain = [s for s, r in zip(samples, self._rewrites) if not r]
            self._plain = Envelope(self.nominal, plain, self.policy, module, peak)
        wide = max(stretch, MARGINAL_WIDTHS)
        return () if self._plain.check(actual, stretch=wide).ok else tuple(taken)

    def check_each(self, actual) -> list[tuple[tuple, EnvelopeVerdict]]:
        """``(path, verdict)`` for every result leaf of ``actual``, each against its own
        envelope (``check`` stops at the first leaf outside)."""
        a_leaves = dict(_leaves(actual))
        out = []
        for path, leaf in self.leaves.items():
            if path not in a_leaves:
                out.append((path, EnvelopeVerdict(False, "missing from the result", leaf=path)))
                continue
            a = np.asarray(a_leaves[path])
            if a.shape != leaf.nominal.shape or a.dtype != leaf.nominal.dtype:
                v = EnvelopeVerdict(False, f"{a.dtype}{list(a.shape)} vs expected "
                                           f"{leaf.nominal.dtype}{list(leaf.nominal.shape)}")
            else:
                v = _check_leaf(leaf, a, self.policy)
            v.leaf = path
            out.append((path, v))
        return out

    def width(self, path=()) -> np.ndarray:
        leaf = self.leaves[path]
        return leaf.hi - leaf.lo


def _narrow_types(module: Module) -> list[ElementType]:
    """Float types of 16 bits or fewer that the module's instructions produce."""
    from hloref.shapes import flatten_shape
    found = {}
    for _, instr in module.instructions():
        for shape in flatten_shape(instr.shape):
            if isinstance(shape, ArrayShape) and is_narrow(shape.element_type):
                found[shape.element_type.name] = shape.element_type
    return sorted(found.values(), key=lambda t: t.float_format.mantissa_bits)


def _on_grid(x: np.ndarray, t: ElementType) -> np.ndarray:
    with np.errstate(all="ignore"):
        back = x.astype(np.float32).astype(t.dtype).astype(np.float64)
    return ~np.isfinite(x) | (back == x)


def _common_grid(values: list, et: ElementType, grids: list) -> ElementType | None:
    """The narrowest of ``grids`` (narrower than ``et``) holding every value, if the
    values are not all trivially representable (small integers, zeros)."""
    for t in grids:
        if t.float_format.mantissa_bits >= et.float_format.mantissa_bits or t.bits >= et.bits:
            continue
        # one value widened at a time (not all runs at once: 8 bytes per element each)
        if all(np.all(_on_grid(v.astype(np.float64), t)) for v in values):
            return t
    return None


#: a program some of whose values came within this fraction of their type's largest
#: finite value (2^-8) may overflow in an order or rounding its runs did not take
OVERFLOW_REACH = 2.0 ** -8


#: Elements per piece in which a large output's envelope is built: every step of
#: ``_make_leaf`` is element by element, and its temporaries (the runs stacked in f64,
#: sorted, their gaps: ``_ENVELOPE_BYTES_PER_RUN``) then stay this small.
_BUILD_CHUNK = 1 << 15


def _built_leaf(nom: np.ndarray, values: list, policy: EnvelopePolicy, *,
                overflow_reachable: bool = False) -> _Leaf:
    """``_make_leaf``, in pieces of ``_BUILD_CHUNK`` elements for a large output."""
    if nom.size <= _BUILD_CHUNK:
        return _make_leaf(nom, values, policy, overflow_reachable=overflow_reachable)
    flat, runs = nom.reshape(-1), [v.reshape(-1) for v in values]
    fields = ("lo", "hi", "nan_ok", "inf_ok")
    out: dict = {}
    for i in range(0, nom.size, _BUILD_CHUNK):
        part = _make_leaf(flat[i:i + _BUILD_CHUNK], [v[i:i + _BUILD_CHUNK] for v in runs],
                          policy, overflow_reachable=overflow_reachable)
        for f in fields:
            piece = getattr(part, f)
            if piece is None:
                continue
            if f not in out:  # filled piece by piece: no second copy to concatenate
                out[f] = np.empty(nom.size, piece.dtype)
            out[f][i:i + piece.size] = piece
    shaped = {f: out[f].reshape(nom.shape) if f in out else None for f in fields}
    return _Leaf(nom, shaped["lo"], shaped["hi"], shaped["nan_ok"], part.et,
                 inf_ok=shaped["inf_ok"])


def _make_leaf(nom: np.ndarray, values: list, policy: EnvelopePolicy, *,
               overflow_reachable: bool = False) -> _Leaf:
    et = float_type(nom)
    if et is None:  # integers, pred: the sampled range
        base = nom.astype(np.int64) if nom.dtype.kind in "biu" else nom.astype(np.float64)
        stack = np.stack([base] + [v.astype(base.dtype) for v in values])
        return _Leaf(nom, stack.min(axis=0), stack.max(axis=0),
                     np.zeros(nom.shape, bool), None)
    if et.is_complex:
        # normwise: a centre and a radius per element. Non-finite values (a NaN or an
        # infinite part) are judged apart: NaN is allowed where a run gave one, the
        # complex infinity where a run gave one; a finite value only around the finite
        # runs (the nominal value, or the runs' midpoint when the nominal one is not
        # finite), as wide as their spread
        zs = np.stack([nom.astype(np.complex128)] + [v.astype(np.complex128) for v in values])
        nan = np.isnan(zs.real) | np.isnan(zs.imag)
        inf = np.isinf(zs.real) | np.isinf(zs.imag)  # (inf, NaN) is both
        finite = ~(nan | inf)
        nan_ok, inf_ok = np.any(nan, axis=0), np.any(inf, axis=0)
        with np.errstate(all="ignore"):
            lo_re = np.min(np.where(finite, zs.real, np.inf), axis=0)
            hi_re = np.max(np.where(finite, zs.real, -np.inf), axis=0)
            lo_im = np.min(np.where(finite, zs.imag, np.inf), axis=0)
            hi_im = np.max(np.where(finite, zs.imag, -np.inf), axis=0)
            mid = (lo_re + hi_re) / 2 + 1j * ((lo_im + hi_im) / 2)
            c = np.where(finite[0], zs[0], mid)
            devs = np.where(finite, np.abs(zs - c), 0.0)
            dev = np.max(devs, axis=0)
            floor = DTYPE_ULPS.get(et.name, 2) * ulp_at(
                np.where(finite[0], nom, np.where(np.any(finite, axis=0), mid, 0)).astype(nom.dtype),
                et)
            if policy.freedoms.ftz:  # a part within the smallest normal of zero may flush
                floor = floor + smallest_normal(et)
            radius = np.where(np.any(finite, axis=0), policy.widen * dev + floor, -1.0)
        c = np.where(np.any(finite, axis=0), c, 0)
        return _Leaf(nom, c, radius, nan_ok, et, inf_ok=inf_ok)
    c = nom.astype(np.float64)
    stack = np.stack([c] + [v.astype(np.float64) for v in values])
    nans = np.isnan(stack)
    nan_ok = np.any(nans, axis=0)
    with np.errstate(all="ignore"):
        lo_s = np.nanmin(np.where(nans, np.inf, stack), axis=0)
        hi_s = np.nanmax(np.where(nans, -np.inf, stack), axis=0)
        dev = np.max(np.where(nans | np.isinf(stack) | np.isinf(c), 0.0,
                              np.abs(stack - c)), axis=0)
        floor = DTYPE_ULPS.get(et.name, 2) * ulp_at(nom, et)
        lo = np.minimum(lo_s, c - policy.widen * dev) - floor
        hi = np.maximum(hi_s, c + policy.widen * dev) + floor
        # runs that land on a coarse grid (bf16 gradients, f8 values: at most three
        # tight clusters of values, well apart) show one step where a correct implementation may take two:
        # there the sampled range itself is extended by widen x the deviation
        ordered = np.sort(stack, axis=0)
        gaps = ordered[1:] - ordered[:-1]
        small, big = gaps <= 0.05 * dev, gaps > 0.5 * dev
        grid = np.all(small | big, axis=0) & (np.sum(big, axis=0) <= 2) & (dev > 0)
        if np.any(grid):
            lo = np.where(grid, lo_s - policy.widen * dev - floor, lo)
            hi = np.where(grid, hi_s + policy.widen * dev + floor, hi)
        # a NaN nominal value with finite runs (an overflow a run's excess precision
        # avoided): the runs' range, widened by its own half-width
        half_s = np.where(np.isfinite(hi_s - lo_s), (hi_s - lo_s) / 2, 0.0)
        floor_s = DTYPE_ULPS.get(et.name, 2) * ulp_at(np.where(
            np.isfinite(hi_s), np.maximum(np.abs(lo_s), np.abs(hi_s)), 0.0).astype(nom.dtype), et)
        lo = np.where(np.isnan(c), lo_s - policy.widen * half_s - floor_s, lo)
        hi = np.where(np.isnan(c), hi_s + policy.widen * half_s + floor_s, hi)
        # the converse: a finite nominal value where most runs gave NaN (an overflow of
        # a type without infinities, inf - inf): the few finite runs cannot bound the
        # element, and the values between the nominal one and the overflow are as
        # reachable as the overflow itself, so any finite value of the type may come out
        lost = np.isfinite(c) & (2 * np.sum(nans[1:], axis=0) > len(values))
        if np.any(lost):
            top = largest_finite(et.dtype)
            lo, hi = np.where(lost, -top, lo), np.where(lost, top, hi)
        if policy.freedoms.ftz:
            tiny = smallest_normal(et)
            touches = (lo < tiny) & (hi > -tiny)
            lo = np.where(touches, np.minimum(lo, -tiny), lo)
            hi = np.where(touches, np.maximum(hi, tiny), hi)
        inf_ok = None
        if overflow_reachable:
            # no correct bit left (the runs spread over more than their magnitude) in a
            # program whose values came near overflowing (a diverging iteration): an
            # order or rounding the runs did not take may overflow on the way, so NaN and
            # the infinities are possible outcomes there, and only there
            spread = hi_s - lo_s
            lost = np.isfinite(spread) & (dev > 0) & \
                (spread >= np.maximum(np.abs(lo_s), np.abs(hi_s)))
            nan_ok, inf_ok = nan_ok | lost, lost
    return _Leaf(nom, lo, hi, nan_ok, et, inf_ok=inf_ok)


def _check_leaf(leaf: _Leaf, a: np.ndarray, policy: EnvelopePolicy,
                stretch: float = 0.0) -> EnvelopeVerdict:
    if stretch and leaf.et is not None:
        with np.errstate(all="ignore"):
            if leaf.et.is_complex:  # a radius (negative: no finite value allowed)
                hi = np.where(leaf.hi >= 0, leaf.hi * (1 + 2 * stretch), leaf.hi)
                leaf = replace(leaf, hi=hi)
            else:
                width = np.where(np.isfinite(leaf.hi - leaf.lo), leaf.hi - leaf.lo, 0.0)
                leaf = replace(leaf, lo=leaf.lo - stretch * width, hi=leaf.hi + stretch * width)
    if leaf.et is None:
        av = a.astype(leaf.lo.dtype)
        bad = (av < leaf.lo) | (av > leaf.hi)
        if not np.any(bad):
            return EnvelopeVerdict(True)
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        return EnvelopeVerdict(False, "integer values differ", index=idx,
                               expected=leaf.nominal[idx].item(), actual=a[idx].item(),
                               lo=leaf.lo[idx].item(), hi=leaf.hi[idx].item(),
                               widths=math.inf, count=int(bad.sum()))
    if leaf.et.is_complex:
        z = a.astype(np.complex128)
        c = leaf.lo
        a_nan = np.isnan(z.real) | np.isnan(z.imag)
        # C99 G.3: a value with an infinite part is the complex infinity, whatever its
        # other part ((inf, NaN) from Smith's quotient, (inf, -inf) from XLA's recovery)
        a_inf = np.isinf(z.real) | np.isinf(z.imag)  # (inf, NaN) is both
        with np.errstate(all="ignore"):
            d = np.where(a_nan | a_inf, np.inf, np.abs(z - c))
            same = (a_nan & leaf.nan_ok) | (a_inf & leaf.inf_ok) | \
                ((z == c) & ~a_nan & ~a_inf & (leaf.hi >= 0))
            bad = ~same & ~(d <= leaf.hi)
            position = np.where(same, 0.0, d / np.where(leaf.hi > 0, leaf.hi, np.inf))
        if not np.any(bad):
            return EnvelopeVerdict(True, max_position=float(np.max(position, initial=0.0)))
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        r = float(leaf.hi[idx])
        return EnvelopeVerdict(False, index=idx, expected=leaf.nominal[idx].item(),
                               actual=a[idx].item(), lo=r, hi=r,
                               widths=float((d[idx] - r) / (2 * r)) if r > 0 else math.inf,
                               count=int(bad.sum()))
    x = a.astype(np.float64)
    c = leaf.nominal.astype(np.float64)
    if leaf.grid is not None:
        off = ~_on_grid(x, leaf.grid)
        if np.any(off):
            idx = tuple(int(i) for i in np.argwhere(off)[0])
            return EnvelopeVerdict(
                False, f"not a value of {leaf.grid.name}: every sampled value is one, and "
                f"without excess precision its rounding may not be skipped", index=idx,
                expected=leaf.nominal[idx].item(), actual=a[idx].item(),
                lo=float(leaf.lo[idx]), hi=float(leaf.hi[idx]), widths=math.inf,
                count=int(off.sum()))
    with np.errstate(all="ignore"):
        nan = np.isnan(x)
        inside = (x >= leaf.lo) & (x <= leaf.hi)
        ok = np.where(nan, leaf.nan_ok, inside | (x == c))
        if leaf.inf_ok is not None:
            ok |= np.isinf(x) & leaf.inf_ok
        half = np.maximum(leaf.hi - c, c - leaf.lo)
        position = np.where(nan | (x == c), 0.0, np.abs(x - c) / np.where(half > 0, half, np.inf))
    bad = ~ok
    if not np.any(bad):
        return EnvelopeVerdict(True, max_position=float(np.nanmax(position, initial=0.0)))
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    lo, hi = float(leaf.lo[idx]), float(leaf.hi[idx])
    width = hi - lo
    xi = float(x[idx])
    outside = (lo - xi) if xi < lo else (xi - hi)
    widths = outside / width if width > 0 and np.isfinite(outside) else math.inf
    return EnvelopeVerdict(False, index=idx, expected=leaf.nominal[idx].item(),
                           actual=a[idx].item(), lo=lo, hi=hi, widths=widths,
                           count=int(bad.sum()))


#: A miss no farther outside than this many envelope widths (every element) is marginal:
#: with 8 runs an element's sampled spread is now and then far below its real one (all
#: 8 runs landing on one side of a near-tie by chance), and among the many elements of
#: a large output a few of those meet a correct answer at its usual distance (XLA's
#: fused attention test modules, bf16, seq 512: 224 of 786,432 elements out, the
#: farthest 3.5 widths, with 8 runs; all inside with 32, at most 0.43 of the half-width;
#: the same attention from JAX on other inputs: 196 out, the farthest 4.4 widths).
MARGINAL_WIDTHS = 10.0


def confirmed(module: Module, args: list, value, envelope: "Envelope",
              verdict: EnvelopeVerdict, policy: EnvelopePolicy, *, limits=None
              ) -> tuple["Envelope", EnvelopeVerdict, EnvelopePolicy]:
    """The verdict on ``value`` that stands: a marginal miss (inside the envelope
    stretched by ``MARGINAL_WIDTHS``) is judged again against an envelope of
    ``policy.confirm_samples`` runs, which then replaces it; anything else is returned
    as it is. A miscompilation stays outside the larger sample's envelope; a sampling
    accident does not."""
    if verdict.ok or policy.samples >= policy.confirm_samples or \
            not envelope.check(value, stretch=MARGINAL_WIDTHS).ok:
        return envelope, verdict, policy
    runs = _confirm_runs(value, policy, limits)
    if runs <= policy.samples:
        return envelope, verdict, policy  # a larger sample would not fit the memory budget
    more = replace(policy, samples=runs)
    env = Envelope.of(sample(module, args, more, limits=limits), more, module)
    return env, env.check(value), more


#: Bytes the envelope of one output element takes per run while it is built: the runs
#: stacked in f64, a sorted copy, their gaps and the masks (measured: bf16 layer norm of
#: 24 million outputs, 32 runs, 23 GB when the process was killed)
_ENVELOPE_BYTES_PER_RUN = 32


def _confirm_runs(value, policy: EnvelopePolicy, limits) -> int:
    """``policy.confirm_samples``, halved until building the envelope fits the memory
    budget (``Limits.max_bytes``): a marginal miss on a huge output is left unconfirmed
    rather than exhausting the machine."""
    from hloref.evaluator.interpreter import Limits
    budget = (limits or Limits()).max_bytes
    elements = sum(int(np.size(leaf)) for _, leaf in _leaves(value))
    runs = policy.confirm_samples
    while runs > policy.samples and (runs + 1) * elements * _ENVELOPE_BYTES_PER_RUN > budget:
        runs //= 2
    return runs


def envelope_of(module: Module, args: list, policy: EnvelopePolicy | None = None, *,
                limits=None) -> Envelope:
    """Sample ``module`` on ``args`` and build the envelope of its result."""
    policy = policy or EnvelopePolicy()
    s = sample(module, args, policy, limits=limits)
    return Envelope.of(s, policy, module)
