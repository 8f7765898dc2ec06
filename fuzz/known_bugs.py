"""Known XLA:CPU bugs that campaigns keep rediscovering: the structure of a module (what
constant folding evaluates, which types a reduce or a fused convert chain has) and
hloref's own values tell that a crash or a mismatch is a variant of a finding already
stored under ``findings/`` (:data:`FILED`), so a campaign counts it as known instead of
filing it again per type or shape. ``hloref replay`` of the stored finding still says
whether the bug reproduces.

The descriptions are ``known_gaps.KNOWN_DIFFERENCES``'s; the classifiers are here:
:func:`known_crash` (crashes) and :func:`known_folding` (mismatches the module's structure
explains; ``known_gaps.known_difference`` handles those a localized culprit explains).
"""

from __future__ import annotations

import numpy as np

from .compare import differs, infinity_became_nan

__all__ = ["FILED", "known_crash", "known_folding"]

#: ``KNOWN_DIFFERENCES`` entries that are filed findings (a bug of XLA's, stored under
#: ``findings/``): campaigns count them as known, while ``hloref replay`` of the stored
#: finding still says whether it reproduces.
FILED = frozenset({"int-divide-by-constant-zero", "concatenate-2bit-aborts", "sort-2bit",
                   "bf16-to-pred-cannot-select", "convolution-simplifier-check",
                   "convert-f4e2m1fn-to-int-saturates", "s4-arithmetic-does-not-wrap",
                   "f8e8m0fnu-constant-folding", "clz-negative-constant-folding",
                   "round-f8e3m4-folding", "f4e2m1fn-infinity-folding", "atan2-zero-zero-folding",
                   "asin-acos-of-integer-never-nan",
                   "reduce-2bit", "convert-int-f8-unsigned-nan", "log-plus-one-f64-band",
                   "convolution-int-folding-saturates", "acos-asin-f8e3m4-known-operand-inf"})

#: ops without operands (or with only a state) that constant folding leaves alone
_NOT_FOLDED = frozenset({"parameter", "rng", "rng-get-and-update-state", "rng-bit-generator",
                         "infeed", "recv", "recv-done", "custom-call", "after-all",
                         "replica-id", "partition-id"})

_TWO_BIT = ("s2", "u2")
#: ops that only move, copy or drop elements (values pass through unchanged)
_MOVES_ELEMENTS = frozenset({"reshape", "slice", "broadcast", "transpose", "copy", "bitcast",
                             "reverse"})
_F8 = ("f8e4m3fn", "f8e4m3fnuz", "f8e5m2", "f8e5m2fnuz", "f8e4m3", "f8e3m4", "f8e4m3b11fnuz")


def _type_name(instr) -> str:
    return getattr(getattr(instr.shape, "element_type", None), "name", "")


def known_crash(report, module, args) -> str | None:
    """The ``KNOWN_DIFFERENCES`` key of a known XLA:CPU crash ``report`` shows, or ``None``:
    a SIGABRT from a module with a concatenate of s2/u2 arrays, a SIGABRT or SIGSEGV from
    one with a sort of them; a SIGABRT whose stderr is LLVM's "Cannot select" from a module
    converting bf16 to pred; a SIGABRT whose stderr is the algebraic simplifier's failed
    window check, from a module with a convolution; a SIGFPE from a module
    with an integer ``divide``/``remainder`` whose operands depend on no parameter (what
    constant folding evaluates on the host) and whose divisor holds a zero in hloref's
    evaluation on ``args`` (INT_MIN / -1 folds fine: checked)."""
    if getattr(report, "verdict", None) != "crash":
        return None
    message = report.message or ""
    module = _parsed(module)
    if module is None:
        return None
    if "SIGABRT" in message and any(
            i.opcode == "concatenate" and _type_name(i) in _TWO_BIT
            for c in module.computations.values() for i in c.instructions):
        return "concatenate-2bit-aborts"
    if ("SIGABRT" in message or "SIGSEGV" in message) and any(
            i.opcode == "sort" and any(_type_name(o) in _TWO_BIT for o in i.operands)
            for c in module.computations.values() for i in c.instructions):
        # a variadic sort of s2/u2 keys corrupts the heap: SIGABRT ("malloc(): unaligned
        # fastbin chunk detected") or SIGSEGV by the run (a campaign, seed 31)
        return "sort-2bit"
    tail = getattr(getattr(report, "oracle_result", None), "stderr_tail", "") or ""
    if "SIGABRT" in message and ("Cannot select" in tail or "X86ISD::CMPP" in tail) and any(
            i.opcode == "convert" and _type_name(i) == "pred" and i.operands and
            _type_name(i.operands[0]) == "bf16"
            for c in module.computations.values() for i in c.instructions):
        return "bf16-to-pred-cannot-select"  # LLVM's X86 instruction selection aborts
    if "SIGABRT" in message and "Window dimensions do not match" in tail and any(
            i.opcode == "convolution" for c in module.computations.values()
            for i in c.instructions):
        return "convolution-simplifier-check"  # the simplifier's rewrite fails its check
    if "SIGFPE" not in message:
        return None
    divisions = _folded(module, _integer_binary(("divide", "remainder")), _free_values(module))
    known = getattr(report, "entry_values", None)
    for values in _operand_values(module, args, divisions, known).values():
        if np.any(np.asarray(values[1]) == 0):
            return "int-divide-by-constant-zero"
    return None


def known_folding(report, module, args) -> str | None:
    """The ``KNOWN_DIFFERENCES`` key of a mismatch the module's structure explains, or
    ``None`` (each measured on XLA:CPU, jaxlib 0.10.2, and stored under ``findings/``):

    * s4 arithmetic that wraps before a widening convert (``s4-arithmetic-does-not-wrap``);
    * an integer ``power`` of folded operands with base -1 and a negative exponent (XLA's
      folder gives 0; its run-time code and hloref -1 or 1 by the exponent's parity);
    * a folded instruction of type f8e8m0fnu (convert, iota, math) whose value hloref
      finds NaN from operands without one: zero and negative values, which f8e8m0fnu
      cannot hold; the folder gives 2^-127 for 0 and drops a sign (``f8e8m0fnu-constant-folding``);
    * a folded f8e8m0fnu instruction reading 2^-127 (an f32 subnormal the folder
      flushes) where every element XLA gets wrong is NaN (``ftz``: the flushed zero has
      no f8e8m0fnu value);
    * a folded ``count-leading-zeros`` of a negative value (-3 in s8 folds to -56, -2 in
      s32 to -32; the run-time code gives 0);
    * a folded ``round-nearest-afz``/``round-nearest-even`` of f8e3m4 (every value folds
      to NaN); a folded ``popcnt`` of s2/s4 (the sign-extended storage byte counted);
    * a folded ``atan2`` with +0/+0 somewhere (NaN, where parameters give +0);
    * ``asin``/``acos`` of a converted integer that is NaN somewhere (XLA:CPU's code
      takes it for never NaN: isnan false, sign 0);
    * a folded convert to f4e2m1fn of an infinity, or atanh of ±1 in f4e2m1fn (the
      folder gives 0, the run-time code the saturated ±6);
    * a ``reduce`` of s2/u2 values, when no instruction alone is the culprit or the
      culprit is that reduce (``reduce-s2-maximum-of-broadcast``);
    * a convert to u32/u64 of an f8 value converted from an integer, where that f8 value
      is NaN (the fused pair gives the unsigned maximum; each alone NaN, then 0);
    * a folded integer ``convolution`` where every element XLA gets wrong is the type's
      largest or smallest value (the folder saturates the sum, the run-time code wraps);
    * ``acos``/``asin`` of f8e3m4 operands known at compile time (an iota) that are out of
      the domain somewhere (NaN; XLA:CPU's fused kernel gives inf);
    * a float ``multiply`` of a converted pred where every element XLA gets wrong is a
      zero for hloref's NaN, infinity or other zero (the simplifier's select; known
      upstream, not stored);
    * ``exp(A)/exp(B)`` where every element XLA gets wrong is a NaN of hloref's (the
      simplifier's exp(A - B), on purpose; inf/inf and 0/0 are NaN by IEEE);
    * a signed integer ``abs(x * x)`` where every element XLA gets wrong is the negation
      of hloref's (the simplifier drops the abs, taking x * x for non-negative; signed
      overflow is undefined to XLA's maintainers, not stored);
    * a complex ``divide`` by a zero where every element XLA gets wrong is hloref's
      infinity (C99 Annex G, and XLA:CPU's divide alone) as NaN: the simplifier's
      ``z * (1 / 0)`` of a constant divisor (``complex-special``).
    """
    if getattr(report, "verdict", None) != "mismatch":
        return None
    module = _parsed(module)
    if module is None:
        return None
    s4 = _s4_to_wider(module)
    free = _free_values(module)  # one fixpoint for every folded class below
    powers = _folded(module, _integer_binary(("power",)), free)
    e8m0 = _folded(module, lambda i: _type_name(i) == "f8e8m0fnu" and not i.opcode.startswith(
        ("get-tuple-element", "tuple", "reshape", "broadcast", "slice", "transpose", "copy",
         "bitcast", "concatenate", "reverse", "pad", "constant")), free)
    clz = _folded(module, lambda i: i.opcode == "count-leading-zeros" and
                  i.shape.element_type.is_signed_integer, free)
    afz = _folded(module, lambda i: i.opcode in ("round-nearest-afz", "round-nearest-even")
                  and _type_name(i) == "f8e3m4", free)
    atan2 = _folded(module, lambda i: i.opcode == "atan2", free)
    popcnt = _folded(module, lambda i: i.opcode == "popcnt" and _type_name(i) in ("s2", "s4"),
                     free)
    arcs8 = _folded(module, lambda i: i.opcode in ("asin", "acos") and
                    _type_name(i) == "f8e3m4", free)
    f4 = _folded(module, lambda i: i.opcode in ("convert", "atanh") and
                 _type_name(i) == "f4e2m1fn", free)
    convs = _folded(module, lambda i: i.opcode == "convolution" and getattr(
        getattr(i.shape, "element_type", None), "is_integer", False), free)
    chains = _int_f8_unsigned(module)
    arcs = {(c.name, i.name): i for c in module.computations.values() for i in c.instructions
            if i.opcode in ("asin", "acos") and i.operands and i.operands[0].opcode == "convert"
            and getattr(getattr(i.operands[0].operands[0].shape, "element_type", None),
                        "is_integer", False)}
    if afz:
        return "round-f8e3m4-folding"
    if convs and _saturated_only(report):
        return "convolution-int-folding-saturates"
    if _pred_products(module) and _zeroed_only(report):
        return "multiply-by-converted-pred"
    if _signed_abs_of_square(module) and _negated_only(report):
        return "signed-square-assumed-nonnegative"
    if _exp_quotients(module) and _nan_where_differs(report, 0):
        return "exp-quotient-rewrite"
    if popcnt:
        return "popcnt-s4"  # the folder counts the sign-extended storage byte
    culprit = report.culprit.innermost() if getattr(report, "culprit", None) else None
    if (culprit is None or culprit.opcode == "reduce") and any(
            i.opcode == "reduce" and any(_type_name(o) in _TWO_BIT for o in i.operands)
            for c in module.computations.values() for i in c.instructions):
        return "reduce-2bit"
    divides = {(c.name, i.name): i for c in module.computations.values()
               for i in c.instructions if i.opcode == "divide" and
               getattr(getattr(i.shape, "element_type", None), "is_complex", False)}
    if not divides or not _infinities_became_nan(report):
        divides = {}
    suspects = {**s4, **powers, **e8m0, **clz, **f4, **chains, **atan2, **arcs, **arcs8,
                **divides}
    values = _operand_values(module, args, suspects, getattr(report, "entry_values", None),
                             with_result=set(e8m0) | set(chains) | set(arcs) | set(arcs8))
    for key in divides:
        if key in values and np.any(np.asarray(values[key][1]) == 0):
            # z / 0 is an infinity by C99 Annex G (XLA:CPU's divide too, alone); the
            # simplifier's z * (1 / 0) of a constant zero gives NaN (a campaign, seed 79)
            return "complex-special"
    exact = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply}
    for key, instr in s4.items():
        if key in values:
            wide = exact[instr.opcode](*(np.asarray(v).astype(np.int64) for v in values[key]))
            if np.any((wide < -8) | (wide > 7)):
                return "s4-arithmetic-does-not-wrap"
    for key, instr in powers.items():
        if key not in values or not instr.shape.element_type.is_signed_integer:
            continue
        lhs, rhs = np.broadcast_arrays(*(np.asarray(v) for v in values[key]))
        if np.any((rhs.astype(np.int64) < 0) & (lhs.astype(np.int64) == -1)):
            return "int-power-negative-folding"
    for key in e8m0:
        if key in values:
            *operands, result = values[key]
            if _has_nan(result) and not any(_has_nan(o) for o in operands):
                return "f8e8m0fnu-constant-folding"
            if any(_holds_least_e8m0(o) for o in operands) and \
                    _nan_where_differs(report, 1):
                # 2^-127 is an f32 subnormal: the folder's f32 arithmetic flushed it,
                # and the zero it made is NaN in f8e8m0fnu (ceil(2^-127) folds to NaN)
                return "ftz"
    for key in clz:
        if key in values and np.any(np.asarray(values[key][0]).astype(np.int64) < 0):
            return "clz-negative-constant-folding"
    for key, instr in f4.items():
        if key in values:
            x = _as_f64(values[key][0])
            if x is not None and np.any(np.isinf(x) if instr.opcode == "convert"
                                        else np.abs(x) == 1):
                return "f4e2m1fn-infinity-folding"
    for key in chains:
        if key in values and _has_nan(values[key][0]):
            return "convert-int-f8-unsigned-nan"
    for key in arcs:
        if key in values and _has_nan(values[key][-1]):
            return "asin-acos-of-integer-never-nan"
    for key in arcs8:
        if key in values and _has_nan(values[key][-1]):
            return "acos-asin-f8e3m4-known-operand-inf"
    for key in atan2:
        if key in values:
            y, x = np.broadcast_arrays(*(_as_f64(v) for v in values[key]))
            if np.any((y == 0) & (x == 0)):
                return "atan2-zero-zero-folding"
    return None


def _pred_products(module) -> bool:
    """Whether a float ``multiply`` reads a ``convert`` of a pred value."""
    for c in module.computations.values():
        for i in c.instructions:
            if i.opcode == "multiply" and getattr(getattr(i.shape, "element_type", None),
                                                  "is_float", False) and any(
                    o.opcode == "convert" and o.operands and
                    _type_name(o.operands[0]) == "pred" for o in i.operands):
                return True
    return False


def _signed_abs_of_square(module) -> bool:
    """Whether a signed integer ``abs`` reads a ``multiply`` of an operand by itself."""
    for c in module.computations.values():
        for i in c.instructions:
            if i.opcode == "abs" and getattr(getattr(i.shape, "element_type", None),
                                             "is_signed_integer", False) and \
                    i.operands and i.operands[0].opcode == "multiply" and \
                    len(i.operands[0].operands) == 2 and \
                    i.operands[0].operands[0] is i.operands[0].operands[1]:
                return True
    return False


def _exp_quotients(module) -> bool:
    """Whether a float ``divide`` reads an ``exponential`` as each operand."""
    return any(i.opcode == "divide" and len(i.operands) == 2 and
               all(o.opcode == "exponential" for o in i.operands)
               for c in module.computations.values() for i in c.instructions)


def _nan_where_differs(report, side: int) -> bool:
    """Whether every element where the oracle's float result differs from hloref's is a
    NaN on one side (``side``: 0 hloref's, 1 the oracle's), and some element differs."""
    seen = False
    for pair in _result_pairs(report):
        if any(x.dtype.kind in "cbiu" for x in pair):
            return False
        ev, av = (_as_f64(x) for x in pair)
        if ev is None or av is None or ev.shape != av.shape:
            return False
        with np.errstate(all="ignore"):
            differ = ~((ev == av) | (np.isnan(ev) & np.isnan(av)))
        if np.any(differ & ~np.isnan((ev, av)[side])):
            return False
        seen = seen or bool(np.any(differ))
    return seen


def _holds_least_e8m0(x) -> bool:
    """Whether an f8e8m0fnu value holds 2^-127 (bits 0), a subnormal as f32."""
    a = np.asarray(x)
    return a.dtype.name == "float8_e8m0fnu" and bool(np.any(a.view(np.uint8) == 0))


def _negated_only(report) -> bool:
    """Whether every element where the oracle's integer result differs from hloref's is
    its negation (in the type: wrapping), and some element differs."""
    seen = False
    for e, a in _result_pairs(report):
        if e.shape != a.shape or e.dtype != a.dtype or e.dtype.kind not in "iu":
            return False
        differ = e != a
        if np.any(differ & (a != (-e.astype(np.int64)).astype(e.dtype))):
            return False
        seen = seen or bool(np.any(differ))
    return seen


def _infinities_became_nan(report) -> bool:
    """``compare.infinity_became_nan`` over the result's leaves: each leaf that differs
    does so only there, and some leaf differs."""
    pairs = [(e, a) for e, a in _result_pairs(report) if np.any(differs(e, a))]
    return bool(pairs) and all(infinity_became_nan(e, a) for e, a in pairs)


def _result_pairs(report) -> list:
    """hloref's and the oracle's result arrays of ``report``, leaf by leaf."""
    from .compare import leaves

    def arrays(value):
        return [np.asarray(leaf) for _, leaf in leaves(value) if isinstance(leaf, np.ndarray)]

    return list(zip(arrays(getattr(report, "expected", None)),
                    arrays(getattr(report, "actual", None))))


def _zeroed_only(report) -> bool:
    """Whether every element where the oracle's float result differs from hloref's is a
    zero on the oracle's side where hloref has NaN, an infinity or the other zero."""
    seen = False
    for e, a in _result_pairs(report):
        if e.shape != a.shape:
            return False
        if e.dtype.kind == "c" or a.dtype.kind == "c":
            if not np.array_equal(e, a, equal_nan=True):
                return False
            continue
        ev, av = _as_f64(e), _as_f64(a)
        if ev is None or av is None:
            if not np.array_equal(e, a):
                return False
            continue
        with np.errstate(all="ignore"):
            same = (ev == av) & (np.signbit(ev) == np.signbit(av)) | (np.isnan(ev) & np.isnan(av))
            zeroed = (av == 0) & (np.isnan(ev) | np.isinf(ev) | (ev == 0))
        if np.any(~same & ~zeroed):
            return False
        seen = seen or bool(np.any(~same))
    return seen


def _saturated_only(report) -> bool:
    """Whether every element where the oracle's integer result differs from hloref's is
    the type's largest or smallest value (and one does)."""
    seen = False
    for e, a in _result_pairs(report):
        if e.shape != a.shape or e.dtype != a.dtype:
            return False
        if not np.array_equal(e, a):
            if e.dtype.kind not in "iu":
                return False
            info = np.iinfo(a.dtype)
            bad = e != a
            if not np.all((a[bad] == info.max) | (a[bad] == info.min)):
                return False
            seen = True
    return seen


def _as_f64(x):
    try:
        return np.asarray(x).astype(np.float64)
    except (TypeError, ValueError):
        return None


def _has_nan(x) -> bool:
    wide = _as_f64(x)
    return wide is not None and bool(np.any(np.isnan(wide)))


def _integer_binary(opcodes):
    def keep(instr):
        et = getattr(instr.shape, "element_type", None)
        return instr.opcode in opcodes and et is not None and et.is_integer and \
            len(instr.operands) == 2
    return keep


def _s4_to_wider(module) -> dict:
    """``{(computation, name): instruction}`` of the s4 ``add``/``subtract``/``multiply``
    that a ``convert`` reads, directly or through ops that only move elements (XLA's
    float-normalization-s4 keeps those unwrapped; a campaign, seed 71, met it through a
    broadcast)."""
    out = {}
    for c in module.computations.values():
        for u in c.instructions:
            if u.opcode != "convert" or not u.operands:
                continue
            i = u.operands[0]
            while i.opcode in _MOVES_ELEMENTS and i.operands:
                i = i.operands[0]
            if i.opcode in ("add", "subtract", "multiply") and _type_name(i) == "s4":
                out[(c.name, i.name)] = i
    return out


def _int_f8_unsigned(module) -> dict:
    """``{(computation, name): instruction}`` of the converts to u32/u64 (and to f4e2m1fn:
    6 where the f8 value is NaN, a campaign, seed 53) whose operand is an f8 value
    converted from an integer, through ops that only move elements (XLA:CPU fuses the
    pair: a campaign, seed 0, met it through reshape, slice, reshape)."""
    out = {}
    for c in module.computations.values():
        for i in c.instructions:
            if i.opcode != "convert" or _type_name(i) not in ("u32", "u64", "f4e2m1fn") or \
                    not i.operands:
                continue
            f8 = i.operands[0]
            while f8.opcode in _MOVES_ELEMENTS and f8.operands:
                f8 = f8.operands[0]
            if f8.opcode == "convert" and _type_name(f8) in _F8 and f8.operands and \
                    getattr(getattr(f8.operands[0].shape, "element_type", None),
                            "is_integer", False):
                out[(c.name, i.name)] = i
    return out


def _parsed(module):
    try:
        import hloref
        return hloref.parse(module) if isinstance(module, str) else module
    except Exception:  # noqa: BLE001 - no module, no explanation
        return None


def _folded(module, keep, free: dict) -> dict:
    """``{(computation, name): instruction}`` of the instructions ``keep`` accepts whose
    operands all depend on no parameter (``free``: ``_free_values``; what constant
    folding evaluates; an iota has none and folds, an rng or a parameter does not)."""
    suspects = {}
    for comp in module.computations.values():
        for instr in comp.instructions:
            if instr.opcode not in _NOT_FOLDED and keep(instr) and \
                    all(free[comp.name].get(o.name) for o in instr.operands):
                suspects[(comp.name, instr.name)] = instr
    return suspects


def _free_values(module) -> dict:
    """``{computation: {name: bool}}``: whether each value depends on no parameter of the
    entry (an array parameter of no elements is free). A parameter of a computation that
    ``call``, ``fusion`` or ``conditional``
    calls is free when every call site passes it a free operand (XLA inlines calls and
    may turn a conditional of cheap branches into a select, so constant folding reaches
    inside; a conditional branch k takes operand k + 1); loops and per-element calls
    (while, map, reduce...) are left out."""
    passed: dict = {}  # (callee, parameter number) -> free at every call site so far
    free: dict = {}
    for _ in range(4):  # nesting depth the fixpoint follows
        free = {}
        for comp in module.computations.values():
            f: dict = {}
            for instr in comp.instructions:  # operands come first in text order
                if instr.opcode == "parameter":
                    # an array of no elements holds no value: XLA folds what reads it
                    # (a reduce over an empty dimension is its init value)
                    f[instr.name] = _no_elements(instr) or (comp is not module.entry and
                                                            passed.get((comp.name,
                                                                        instr.parameter_number),
                                                                       False))
                    continue
                # xor(x, x), compare(x, x)...: constants whatever x (_self_cancelling)
                f[instr.name] = _self_cancelling(instr) or (
                    instr.opcode not in _NOT_FOLDED and
                    all(f.get(o.name, False) for o in instr.operands))
            free[comp.name] = f
        sites: dict = {}
        for comp in module.computations.values():
            for instr in comp.instructions:
                if instr.opcode in ("call", "fusion"):
                    targets = [(name, instr.operands) for name in instr.called_computation_names()]
                elif instr.opcode == "conditional":
                    targets = [(name, [instr.operands[k + 1]]) for k, name in
                               enumerate(instr.called_computation_names())
                               if k + 1 < len(instr.operands)]
                else:
                    continue
                for name, args in targets:
                    for i, a in enumerate(args):
                        key = (name, i)
                        sites[key] = sites.get(key, True) and free[comp.name].get(a.name, False)
        if sites == passed:
            break
        passed = sites
    return free


def _no_elements(instr) -> bool:
    return getattr(instr.shape, "is_array", False) and instr.shape.size == 0


def _through_copies(instr):
    """The value ``instr`` forwards unchanged: through copies and reshapes or bitcasts to
    its own shape (XLA's simplifier removes them first)."""
    while instr.opcode in ("copy", "reshape", "bitcast") and len(instr.operands) == 1 and \
            str(instr.operands[0].shape) == str(instr.shape):
        instr = instr.operands[0]
    return instr


def _self_cancelling(instr) -> bool:
    """Whether ``instr`` is a constant whatever its operand, which XLA's algebraic
    simplifier makes one before folding: integer or pred ``xor(x, x)``, integer
    ``subtract(x, x)`` (x also through a copy or a reshape to its own shape);
    ``compare(x, x)`` of integers or pred, with ``type=TOTALORDER``, or LT/GT (false even
    for NaN)."""
    if len(instr.operands) != 2 or _through_copies(instr.operands[0]) is not \
            _through_copies(instr.operands[1]):
        return False
    if instr.opcode in ("xor", "subtract"):
        et = getattr(instr.shape, "element_type", None)
        return bool(et is not None and (et.is_integer or (et.is_pred and instr.opcode == "xor")))
    if instr.opcode == "compare":
        et = getattr(instr.operands[0].shape, "element_type", None)
        direction = str(instr.attrs.get("direction", ""))
        kind = str(instr.attrs.get("type", ""))
        return bool(et is not None and (et.is_integer or et.is_pred)) or \
            kind == "TOTALORDER" or direction in ("LT", "GT")
    return False


def _operand_values(module, args, instrs: dict, known: dict | None = None,
                    with_result=frozenset()) -> dict:
    """``{key: [operand values]}`` of ``instrs`` (``{(computation, name): instruction}``)
    in hloref's evaluation of ``module`` on ``args``, for those whose operands were all
    seen, each followed by the instruction's own value where its key is in
    ``with_result``; empty when there are none or the evaluation fails. ``known``:
    values already computed (``DiffReport.entry_values``): the module is evaluated again
    only when a wanted value is not among them."""
    if not instrs:
        return {}

    def names(key, instr):
        out = [(key[0], o.name) for o in instr.operands]
        return out + [key] if key in with_result else out

    wanted = {n for key, instr in instrs.items() for n in names(key, instr)}
    if known and wanted <= known.keys():
        seen = known  # read only
    else:
        seen = {}

        def observe(comp, instr, value):
            if (comp.name, instr.name) in wanted:
                seen[(comp.name, instr.name)] = value

        try:
            from hloref.evaluator.interpreter import Interpreter
            Interpreter(module, observer=observe).run(list(args))
        except Exception:  # noqa: BLE001 - no evaluation, no explanation
            return {}
    out = {}
    for key, instr in instrs.items():
        values = [seen.get(n) for n in names(key, instr)]
        if all(v is not None for v in values):
            out[key] = values
    return out
