"""The op catalogue (``hloref.opcodes``) against XLA's sources and against the modules
that read it.

XLA's side is read from a git directory of XLA's sources when there is one
(``HLOREF_XLA_MIRROR``: e.g. ``git clone --bare`` of openxla/xla or ROCm/xla, ref
``main``; the project's CI machines have one where the default names); otherwise from
the tables below,
written from that mirror at commit 183fa00cb5d82384463a1a7aed1ab06bc9026974
(2026-08-22). When the mirror is there, the tables are checked against it too.
"""

from __future__ import annotations

import inspect
import os
import re
import subprocess

import pytest

from hloref import opcodes as cat

MIRROR = os.environ.get("HLOREF_XLA_MIRROR", "/work/.mirror/ROCm+xla/repo")
REF = "183fa00cb5d82384463a1a7aed1ab06bc9026974"

#: ``HLO_OPCODE_LIST`` of ``xla/hlo/ir/hlo_opcode.h`` at REF: text name and arity.
PINNED_OPCODES = """
abs:1 acos:1 acosh:1 add:2 add-dependency:2 after-all:var all-gather:var all-gather-done:1
all-gather-start:var all-reduce:var all-reduce-done:1 all-reduce-start:var all-to-all:var
and:2 asin:1 asinh:1 async-done:1 async-start:var async-update:var atan2:2 atanh:1
batch-norm-grad:5 batch-norm-inference:5 batch-norm-training:3 bitcast:1 bitcast-convert:1
broadcast:1 call:var cbrt:1 ceil:1 cholesky:1 clamp:3 count-leading-zeros:1
collective-broadcast:var collective-permute:var collective-permute-done:1
collective-permute-start:var compare:2 complex:2 concatenate:var conditional:var constant:0
convert:1 convolution:var copy:1 copy-done:1 copy-start:1 cosine:1 cosh:1 custom-call:var
divide:2 domain:1 dot:2 dynamic-reshape:var dynamic-slice:var dynamic-update-slice:var erf:1
exponential:1 exponential-minus-one:1 fft:1 floor:1 fusion:var gather:2 get-dimension-size:1
get-tuple-element:1 imag:1 infeed:1 iota:0 is-finite:1 log:1 log-plus-one:1 logistic:1
map:var maximum:2 minimum:2 mulhi:2 multiply:2 negate:1 not:1 opt-barrier:1 or:2 outfeed:2
pad:2 parameter:0 partition-id:0 popcnt:1 power:2 ragged-all-to-all:6 ragged-dot:3 real:1
recv:1 recv-done:1 reduce:var reduce-precision:1 reduce-scatter:var reduce-window:var
remainder:2 replica-id:0 reshape:1 reverse:1 rng:var rng-bit-generator:1
rng-get-and-update-state:0 round-nearest-afz:1 round-nearest-even:1 rsqrt:1 scaled-dot:4
scan:var scatter:var select:3 select-and-scatter:3 send:2 send-done:1 set-dimension-size:2
shift-left:2 shift-right-arithmetic:2 shift-right-logical:2 sign:1 sine:1 sinh:1 slice:1
sort:var sqrt:1 stochastic-convert:2 subtract:2 tan:1 tanh:1 topk:1 transpose:1
triangular-solve:2 tuple:var while:1 xor:2
"""
#: ``HloInstruction::IsOpElementwise`` (``xla/hlo/ir/hlo_instruction.cc``) at REF.
PINNED_ELEMENTWISE = """
abs acos acosh asin asinh atanh round-nearest-afz round-nearest-even ceil count-leading-zeros
convert bitcast-convert copy cosine cosh erf exponential exponential-minus-one floor imag
is-finite log log-plus-one not negate popcnt real reduce-precision rsqrt logistic sign sine
sinh sqrt cbrt tan tanh add atan2 compare complex divide maximum minimum multiply mulhi power
remainder subtract and or xor shift-left shift-right-arithmetic shift-right-logical
stochastic-convert select clamp
"""
#: The transcendental opcodes of ``HloCostAnalysis::HandleElementwiseOp``
#: (``xla/service/hlo_cost_analysis.cc``) at REF.
PINNED_TRANSCENDENTAL = """
acos acosh asin asinh atan2 atanh cbrt cosine cosh erf exponential exponential-minus-one log
log-plus-one logistic power rsqrt sine sinh sqrt tan tanh
"""
#: The unconditional cases of ``HloInstruction::HasSideEffectNoRecurse`` at REF.
PINNED_SIDE_EFFECTING = """
send send-done recv recv-done rng rng-get-and-update-state infeed outfeed all-reduce-start
all-reduce-done all-gather-start all-gather-done collective-broadcast collective-permute-start
collective-permute-done
"""


def _git_show(path: str) -> str | None:
    if not os.path.isdir(MIRROR):
        return None
    try:
        return subprocess.run(["git", f"--git-dir={MIRROR}", "show", f"main:{path}"],
                              check=True, capture_output=True, text=True, timeout=60).stdout
    except (subprocess.SubprocessError, OSError):
        return None


def _pinned_opcodes() -> dict[str, int]:
    return {n: cat.VARIADIC if a == "var" else int(a)
            for n, a in (e.split(":") for e in PINNED_OPCODES.split())}


def _mirror_opcodes() -> tuple[dict[str, int], dict[str, str]] | None:
    """Text name → arity, and enum name → text name, from the mirror's header."""
    text = _git_show("xla/hlo/ir/hlo_opcode.h")
    if text is None:
        return None
    rows = re.findall(r'V\((k\w+),\s*"([^"]+)",\s*(kHloOpcodeIsVariadic|-?\d+)', text)
    arity = {n: cat.VARIADIC if a == "kHloOpcodeIsVariadic" else int(a) for _, n, a in rows}
    return arity, {k: n for k, n, _ in rows}


def _cases(body: str, names: dict[str, str]) -> set[str]:
    return {names[k] for k in re.findall(r"HloOpcode::(k\w+)", body)}


def _mirror_groups() -> dict[str, set[str]] | None:
    got = _mirror_opcodes()
    hlo = _git_show("xla/hlo/ir/hlo_instruction.cc")
    cost = _git_show("xla/service/hlo_cost_analysis.cc")
    if got is None or hlo is None or cost is None:
        return None
    names = got[1]
    elementwise = hlo.split("bool HloInstruction::IsOpElementwise(HloOpcode opcode) {")[1]
    side = hlo.split("bool HloInstruction::HasSideEffectNoRecurse() const {")[1]
    trans = cost.split("kLogistic is included in")[1]
    return {"elementwise": _cases(elementwise.split("default:")[0], names),
            "side-effecting": _cases(side.split("return true;")[0], names),
            "transcendental": _cases(trans.split(") {")[0], names)}


PINNED_GROUPS = {"elementwise": set(PINNED_ELEMENTWISE.split()),
                 "transcendental": set(PINNED_TRANSCENDENTAL.split()),
                 "side-effecting": set(PINNED_SIDE_EFFECTING.split())}


def xla_opcodes() -> dict[str, int]:
    got = _mirror_opcodes()
    return got[0] if got is not None else _pinned_opcodes()


def xla_groups() -> dict[str, set[str]]:
    return _mirror_groups() or PINNED_GROUPS


# --------------------------------------------------------------------------- against XLA

def test_pinned_tables_match_the_mirror():
    """The fallback tables say what the mirror says (checked where the mirror is)."""
    got, groups = _mirror_opcodes(), _mirror_groups()
    if got is None or groups is None:
        pytest.skip("no git directory of XLA's sources (set HLOREF_XLA_MIRROR to a "
                    "`git clone --bare` of openxla/xla to check the pinned tables against "
                    "it): the pinned tables are used as written")
    assert got[0] == _pinned_opcodes()
    assert groups == PINNED_GROUPS


def test_covers_xla_opcode_list_with_its_arities():
    xla = xla_opcodes()
    assert len(xla) >= 133
    missing = sorted(set(xla) - set(cat.CATALOGUE))
    assert not missing, f"XLA opcodes missing from the catalogue: {missing}"
    wrong = {op: (cat.CATALOGUE[op].arity, a) for op, a in xla.items()
             if cat.CATALOGUE[op].arity != a}
    assert not wrong, f"arity (catalogue, XLA) differs: {wrong}"


def test_extra_opcodes_are_the_documented_ones():
    assert set(cat.CATALOGUE) - set(xla_opcodes()) <= set(cat.NOT_IN_PINNED_XLA)


@pytest.mark.parametrize("group", ["elementwise", "transcendental", "side-effecting"])
def test_groups_that_xla_defines(group):
    xla = xla_groups()[group]
    # atan: hloref's extra unary op, elementwise and transcendental like its siblings
    extra = {"atan"} if group != "side-effecting" else set()
    assert cat.GROUPS[group] == xla | extra


def test_min_operands_and_arity_agree():
    for op, info in cat.CATALOGUE.items():
        if info.arity == cat.VARIADIC:
            assert info.min_operands >= 0, op
        else:
            assert info.min_operands == info.arity, op


@pytest.mark.parametrize("opcode, group, member", [
    # one case per decision the catalogue writes down (see the group descriptions)
    ("scatter", "accumulating", True),            # duplicate indices combine in any order
    ("select-and-scatter", "accumulating", True),  # overlapping windows add in any order
    ("reduce-scatter", "accumulating", True),
    ("fft", "accumulating", True),
    ("batch-norm-training", "accumulating", False),  # expanded, bounded as an expansion
    ("batch-norm-training", "expanded", True),
    ("gather", "accumulating", False),
    ("bitcast", "structural", True),
    ("copy", "structural", False),                 # elementwise by XLA's list
    ("floor", "discontinuous", True),
    ("maximum", "discontinuous", False),
])
def test_group_decisions(opcode, group, member):
    assert (opcode in cat.GROUPS[group]) is member


def test_unary_and_binary_partition_the_elementwise_arithmetic():
    assert not cat.UNARY & cat.BINARY
    assert cat.UNARY | cat.BINARY <= cat.ELEMENTWISE
    assert all(cat.CATALOGUE[op].arity == 1 for op in cat.UNARY)
    assert all(cat.CATALOGUE[op].arity == 2 for op in cat.BINARY)


# --------------------------------------------------------------------------- against readers

def test_every_attribute_has_a_type():
    for op, info in cat.CATALOGUE.items():
        untyped = [a for a in info.attributes if a not in cat.ATTRIBUTE_TYPES]
        assert not untyped, f"{op}: attributes without a type: {untyped}"
        assert set(info.required) <= set(info.attributes), op


def test_shape_rules_cover_the_catalogue_and_take_its_attributes():
    from hloref.shape_inference import FREE_PARTS, INFER
    assert set(INFER) == set(cat.CATALOGUE)
    free = set(FREE_PARTS.values()) | {"_"}
    for op, fn in INFER.items():
        kws = {n for n, p in inspect.signature(fn).parameters.items()
               if p.kind is p.KEYWORD_ONLY} - free
        assert kws <= set(cat.CATALOGUE[op].attributes), (op, kws - set(cat.CATALOGUE[op].attributes))


#: Keywords of evaluator op functions that are not HLO attributes, with the reason.
NOT_ATTRIBUTES = {
    "shape": "the result shape (the interpreter passes it)",
    "ctx": "the running interpreter",
    "literal": "a constant's value", "instruction_name": "for error messages",
    "operand_shapes": "bitcast's operand layouts", "opcode": "shared functions",
    "accumulate": "dot's native-accumulation switch for the envelope's runs",
    "reducer_order": "reduce's and reduce-window's left fold for the envelope's order budget",
}


def test_evaluator_registry_agrees_on_family_and_attributes():
    from hloref.evaluator.registry import INTERPRETER_OPCODES, OPS, load_all
    load_all()
    assert set(OPS) | INTERPRETER_OPCODES <= set(cat.CATALOGUE)
    for op, entry in OPS.items():
        assert entry.family == cat.CATALOGUE[op].family, op
        unknown = {n for n, _ in entry.keywords} - set(cat.CATALOGUE[op].attributes) \
            - set(NOT_ATTRIBUTES)
        assert not unknown, f"{op}: evaluator keywords not in the catalogue: {unknown}"
    assert INTERPRETER_OPCODES == {op for op, i in cat.CATALOGUE.items()
                                   if i.family == "interpreter"}


def test_registries_load_the_catalogue_families():
    """Both registries import the modules the ``family`` column names (and their
    ``<family>_<part>`` modules), and every op is registered by its family's module or
    one of its parts: ``gpu/linalg_fft.py`` may register fft (family linalg), not
    ``gpu/shape_ops.py``."""
    from pathlib import Path

    import hloref.evaluator as evaluator_pkg
    import hloref.gpu as gpu_pkg
    from hloref.evaluator.registry import FAMILIES, family_modules, family_of_module, load_all
    from hloref.gpu.registry import load_all as gpu_load_all
    assert FAMILIES == {i.family for i in cat.CATALOGUE.values()} - {"interpreter"}
    assert family_of_module("custom_call_lapack") == "custom_call"
    assert family_of_module("dot_variants") == "dot_variants"   # a family, not dot's part
    assert family_of_module("linalg_fft") == "linalg" and family_of_module("numeric") is None
    for package, registry in ((evaluator_pkg, load_all()), (gpu_pkg, gpu_load_all())):
        modules = family_modules(Path(package.__file__).parent)
        assert set(modules) >= {e.family for e in registry.values()}
        for op, entry in registry.items():
            assert family_of_module(entry.family) == cat.CATALOGUE[op].family, \
                f"{package.__name__}: {op} is registered in {entry.family}.py, its family is " \
                f"{cat.CATALOGUE[op].family}"
    assert set(gpu_load_all()) == set(load_all())


def test_tables_other_modules_still_keep_agree_with_the_catalogue():
    """The copies the parser and the verifier keep (until they read the catalogue)
    hold what the catalogue holds, so replacing them changes nothing."""
    from hloref import verifier
    from hloref.parser import attributes, module
    assert module.OPCODES == set(cat.CATALOGUE)
    assert module.SHAPE_INFERABLE == cat.SHAPE_INFERABLE
    assert verifier.OPCODE_ARITY == {op: None if a == cat.VARIADIC else a
                                     for op, a in cat.OPCODE_ARITY.items()}
    assert verifier.MIN_OPERANDS == cat.MIN_OPERANDS
    assert {op: set(a) for op, a in verifier.REQUIRED_ATTRS.items()} == \
        {op: set(a) for op, a in cat.REQUIRED_ATTRS.items()}
    for table, kind in [("INT_LIST_ATTRS", "int_list"), ("INT_ATTRS", "int"),
                        ("BOOL_ATTRS", "bool"), ("FLOAT_ATTRS", "float"), ("ENUM_ATTRS", "enum"),
                        ("ENUM_LIST_ATTRS", "enum_list"), ("STRING_ATTRS", "string"),
                        ("COMP_ATTRS", "computation"), ("COMP_LIST_ATTRS", "computation_list"),
                        ("LITERAL_ATTRS", "literal")]:
        assert getattr(attributes, table) == cat.attributes_of_type(kind), table
