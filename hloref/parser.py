"""Parser of XLA's HLO text format into ``hloref.ir``.

Entry points: ``parse_module(text, filename=None) -> Module``,
``parse_shape(text) -> Shape`` and ``parse_literal(text, shape) -> value``.
Every malformed input raises ``HloParseError`` with the line and column of the
offending token; no other exception escapes.
"""

from __future__ import annotations

import math
import re
from typing import Any

import ml_dtypes
import numpy as np

from . import attrs as A
from .errors import HloParseError
from .ir import Computation, Instruction, Module, ProgramShape
from .lexer import NUMBER_RE, Scanner
from .shapes import (UNBOUNDED, ArrayShape, BufferShape, Layout, OpaqueShape, Shape, TokenShape,
                     TupleShape)
from .types import ELEMENT_TYPES, ElementType

__all__ = ["parse_module", "parse_shape", "parse_literal", "OPCODES", "SECTION_TITLES"]

#: The 136 opcode text names of ``HLO_OPCODE_LIST`` (``xla/hlo/ir/hlo_opcode.h``).
OPCODES = frozenset("""
abs acos acosh add add-dependency after-all all-gather all-gather-done all-gather-start
all-reduce all-reduce-done all-reduce-start all-to-all and asin asinh async-done async-start
async-update atan atan2 atanh batch-norm-grad batch-norm-inference batch-norm-training bitcast
bitcast-convert broadcast call cbrt ceil cholesky clamp count-leading-zeros collective-broadcast
collective-permute collective-permute-done collective-permute-start collective-reduce compare
complex concatenate conditional constant convert convolution copy copy-done copy-start cosine
cosh custom-call divide domain dot dynamic-reshape dynamic-slice dynamic-update-slice erf
exponential exponential-minus-one fft floor fusion gather get-dimension-size get-tuple-element
imag infeed iota is-finite log log-plus-one logistic map maximum minimum mulhi multiply negate
not opt-barrier or outfeed pad parameter partition-id popcnt power ragged-all-to-all ragged-dot
real recv recv-done reduce reduce-precision reduce-scatter reduce-window remainder replica-id
reshape reverse rng rng-bit-generator rng-get-and-update-state round-nearest-afz
round-nearest-even rsqrt scaled-dot scan scatter select select-and-scatter send send-done
set-dimension-size shift-left shift-right-arithmetic shift-right-logical shuffle sign sine sinh
slice sort sqrt stochastic-convert subtract tan tanh topk transpose triangular-solve tuple while
xor
""".split())
assert len(OPCODES) == 136, len(OPCODES)

#: Opcodes with their own start/done opcodes: never async-wrapped in text.
_DEDICATED_ASYNC = frozenset(["all-gather", "all-reduce", "collective-permute", "copy", "send", "recv"])
_ASYNC_SUFFIXES = {"-start": "async-start", "-update": "async-update", "-done": "async-done"}

#: Opcodes whose result shape XLA's parser infers when the text leaves it out
#: (``CanInferShape`` in ``xla/hlo/parser/hlo_parser.cc``); every other opcode needs it.
SHAPE_INFERABLE = frozenset("""
abs acos acosh asin asinh add add-dependency after-all atan2 atanh batch-norm-grad
batch-norm-inference batch-norm-training broadcast call ceil cholesky clamp
count-leading-zeros compare complex concatenate conditional convolution copy cosine cosh
opt-barrier divide domain dot erf exponential exponential-minus-one fft floor gather
get-dimension-size set-dimension-size get-tuple-element imag is-finite log log-plus-one
logistic and not or xor map maximum minimum multiply mulhi negate pad partition-id popcnt
power ragged-dot real reduce remainder replica-id reverse round-nearest-afz
round-nearest-even rsqrt scan scaled-dot scatter select shift-left shift-right-arithmetic
shift-right-logical sign sine sinh sqrt cbrt reduce-window select-and-scatter sort subtract
tan tanh transpose triangular-solve tuple while topk
""".split())
_SHAPE_REQUIRED = OPCODES - SHAPE_INFERABLE

#: Sections XLA may print between the header and the first computation.
SECTION_TITLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")

INT_LIST_ATTRS = frozenset("""
dimensions fft_length slice_sizes dynamic_slice_sizes lhs_contracting_dims rhs_contracting_dims
lhs_batch_dims rhs_batch_dims lhs_ragged_dims rhs_group_dims offset_dims collapsed_slice_dims
start_index_map operand_batching_dims start_indices_batching_dims update_window_dims
inserted_window_dims scatter_dims_to_operand_dims input_batching_dims
scatter_indices_batching_dims shifts
""".split())
INT_ATTRS = frozenset("""
index iota_dimension feature_group_count batch_group_count index_vector_dim k feature_index
exponent_bits mantissa_bits channel_id
""".split())
BOOL_ATTRS = frozenset("""
indices_are_sorted unique_indices is_stable largest has_dynamic_root lower left_side
unit_diagonal is_host_transfer use_global_device_ids constrain_layout
custom_call_has_side_effect is_cross_program_prefetch
""".split())
FLOAT_ATTRS = frozenset(["epsilon"])
ENUM_ATTRS = frozenset("direction type fft_type distribution algorithm kind mode transpose_a".split())
ENUM_LIST_ATTRS = frozenset(["operand_precision"])
STRING_ATTRS = frozenset(["custom_call_target"])
COMP_ATTRS = frozenset("""
to_apply calls condition body true_computation false_computation select scatter
""".split())
COMP_LIST_ATTRS = frozenset(["branch_computations", "called_computations"])
#: Attributes holding a shaped literal (``shuffle``'s ``indices=s32[4]{0} {3, 1, 0, 2}``).
LITERAL_ATTRS = frozenset(["indices"])
CONTROL_PREDECESSORS = "control-predecessors"

_DXD_RE = re.compile(r"\d+(?:x\d+)*")
_PAD_RE = re.compile(r"-?\d+_-?\d+(?:x-?\d+_-?\d+)*")
_PADDING_RE = re.compile(r"-?\d+_-?\d+(?:_-?\d+)?(?:x-?\d+_-?\d+(?:_-?\d+)?)*")
_REVERSAL_RE = re.compile(r"[01](?:x[01])*")
_DIM_LABELS_RE = re.compile(r"[0-9bf?]{2,}_[0-9io?]{2,}->[0-9bf?]{2,}")
_NAN_RE = re.compile(r"-?nan(?:\(0x([0-9a-fA-F]+)\))?")
_IOTA_GROUPS_RE = re.compile(r"\[(\d+),(\d+)\]<=\[([\d,]+)\](?:T\(([\d,]*)\))?")
_IDENT_CHAR = re.compile(r"[A-Za-z0-9_.\-]")
_WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NESTED_BRACE_RE = re.compile(r"\{\s*\{")
_INT_TEXT_RE = re.compile(r"[-+]?\d+")
_AFTER_NUMBER_RE = re.compile(r"[A-Za-z0-9_]")


# ----------------------------------------------------------------------------------------
# Float helpers (shared with the printer)
# ----------------------------------------------------------------------------------------

class FloatInfo:
    """Per-type constants for literal conversion: overflow threshold, NaN bit patterns."""

    def __init__(self, et: ElementType):
        self.et = et
        self.dtype = et.dtype
        fmt = et.float_format
        self.fmt = fmt
        self.bits = fmt.bits
        self.mant_mask = (1 << fmt.mantissa_bits) - 1
        self.udtype = et.bits_dtype
        if et.name == "f64":
            self.threshold = math.inf
        else:
            fmax = float(ml_dtypes.finfo(self.dtype).max)
            ulp = 2.0 ** (math.floor(math.log2(fmax)) - fmt.mantissa_bits)
            self.threshold = fmax + ulp / 2
        with np.errstate(all="ignore"):
            self.nan_bits = int(np.array([np.nan]).astype(self.dtype).view(self.udtype)[0])
            self.neg_nan_bits = int(np.array([-np.nan]).astype(self.dtype).view(self.udtype)[0])

    def nan_with_payload(self, negative: bool, payload: int | None) -> int:
        """Bit pattern of ``[-]nan[(0xpayload)]``; raises ValueError when impossible."""
        fmt = self.fmt
        if not fmt.has_nan:
            raise ValueError(f"{self.et.name} has no NaN")
        default = self.neg_nan_bits if negative else self.nan_bits
        if payload is None:
            return default
        if fmt.nan_style != "ieee":
            if payload != (default & self.mant_mask):
                raise ValueError(f"{self.et.name} has no NaN payload bits; "
                                 f"payload 0x{payload:x} is not allowed")
            return default
        if payload == 0 or payload > self.mant_mask:
            raise ValueError(f"NaN payload 0x{payload:x} does not fit in the "
                             f"{fmt.mantissa_bits} mantissa bits of {self.et.name}")
        exp_mask = ((1 << fmt.exponent_bits) - 1) << fmt.mantissa_bits
        sign = (1 << (self.bits - 1)) if negative else 0
        return sign | exp_mask | payload


_FLOAT_INFO: dict[str, FloatInfo] = {}


def float_info(et: ElementType) -> FloatInfo:
    info = _FLOAT_INFO.get(et.name)
    if info is None:
        info = _FLOAT_INFO[et.name] = FloatInfo(et)
    return info


# ----------------------------------------------------------------------------------------
# The parser
# ----------------------------------------------------------------------------------------

class _Parser:
    def __init__(self, text: str, filename: str | None = None):
        if not isinstance(text, str):
            raise HloParseError(f"expected HLO text (str), got {type(text).__name__}",
                                filename=filename)
        self.s = Scanner(text, filename)
        self.filename = filename
        # (instruction, attr key, index or None, computation name, position) to resolve
        self.comp_refs: list[tuple[str, int]] = []
        #: computations written inline as attribute values (``to_apply={...}``)
        self.inline_comps: dict[str, Computation] = {}
        #: position of each instruction whose shape is inferred (error messages)
        self.positions: dict[int, int] = {}
        #: instructions created while reading the current one (nested operands,
        #: ``%x#0`` tuple-element operands), in the order they must precede it
        self.created: list[Instruction] = []
        self._nested_refs: list = []
        self.anon = 0

    def decl_name(self) -> str | None:
        """A declared name, which XLA also accepts as ``name:``."""
        n = self.s.name()
        if n is not None and self.s.peek_char() == ":":
            self.s.pos += 1
        return n

    # -- module ---------------------------------------------------------------------------
    def module(self) -> Module:
        s = self.s
        s.skip_ws()
        start = s.pos
        headerless = s.peek_ident() != "HloModule"
        if headerless:
            # XLA also reads bare computations; the module is then named after the entry.
            if s.peek_ident() != "ENTRY":
                self.decl_name()
                ok = s.at("{")
                s.pos = start
                if not ok:
                    raise s.expected("'HloModule' at the start of the module", start)
            module = Module(name="", source_name=self.filename)
        else:
            s.ident()
            name = self.decl_name()
            if name is None:
                raise s.expected("module name")
            module = Module(name=name, source_name=self.filename)
        while not headerless and s.accept(","):
            key_pos = s.pos
            key = s.expect_ident("module attribute name")
            s.expect("=", f"after module attribute '{key}'")
            if key in module.attrs:
                raise s.error(f"duplicate module attribute '{key}'", key_pos)
            module.attrs[key] = self.module_attr(key)
        module.extra_sections = self.sections()
        entry: str | None = None
        entry_pos = 0
        while not s.at_end():
            comp_pos = s.pos
            comp, is_entry = self.computation()
            module.computations.update(self.inline_comps)
            self.inline_comps.clear()
            if comp.name in module.computations:
                raise s.error(f"duplicate computation name '{comp.name}'", comp_pos)
            module.computations[comp.name] = comp
            if is_entry:
                if entry is not None:
                    raise s.error(f"second ENTRY computation '{comp.name}' (the first is "
                                  f"'{entry}' at line {s.line_col(entry_pos)[0]})", comp_pos)
                entry, entry_pos = comp.name, comp_pos
        if not module.computations:
            raise s.error("expected at least one computation, found end of input")
        if entry is None:
            entry = list(module.computations)[-1]
        module.entry_name = entry
        module.computations[entry].is_entry = True
        for ref, pos in self.comp_refs:
            if ref not in module.computations:
                raise s.error(f"unknown computation '{ref}'", pos)
        if headerless:
            module.name = "module_" + entry
        infer_missing_shapes(module, self.positions, s)
        return module

    def module_attr(self, key: str) -> Any:
        s = self.s
        if key == "is_scheduled":
            return self.bool_value()
        if key in ("replica_count", "num_partitions"):
            return s.int_()
        if key == "entry_computation_layout":
            s.expect("{", "to start entry_computation_layout")
            ps = self.program_shape()
            s.expect("}", "after entry_computation_layout")
            return ps
        return self.raw_value()

    def program_shape(self) -> ProgramShape:
        s = self.s
        s.expect("(", "to start the parameter shapes")
        params = self.shape_list("after parameter shapes")
        s.expect("->", "after parameter shapes")
        return ProgramShape(params, self.shape())

    def sections(self) -> list[tuple[str, str]]:
        s = self.s
        out = []
        while True:
            s.skip_ws()
            start = s.pos
            title = s.peek_ident()
            if title not in SECTION_TITLES:
                return out
            text = s.text
            eol = text.find("\n", start)
            if eol < 0 or text[start + len(title):eol].strip():
                return out  # not a section header line
            lines = []
            pos = eol + 1
            while pos < len(text):
                nl = text.find("\n", pos)
                line = text[pos:] if nl < 0 else text[pos:nl]
                stripped = line.strip()
                if not stripped or not stripped[0].isdigit():
                    break
                lines.append(line.rstrip())
                pos = len(text) if nl < 0 else nl + 1
            out.append((title, "\n".join(lines)))
            s.pos = pos

    # -- computations --------------------------------------------------------------------
    def computation(self) -> tuple[Computation, bool]:
        s = self.s
        is_entry = False
        if s.peek_ident() == "ENTRY":
            s.ident()
            is_entry = True
        name = self.decl_name()
        if name is None:
            raise s.expected("computation name" if is_entry else "computation name or 'ENTRY'")
        comp = Computation(name=name)
        if s.at("("):
            comp.has_signature = True
            s.expect("(")
            if not s.accept(")"):
                while True:
                    if s.name() is None:
                        raise s.expected("parameter name in computation signature")
                    s.accept(":")  # XLA also reads `(a f32[2], ...)`
                    self.shape()
                    if s.accept(","):
                        continue
                    s.expect(")", "after computation parameters")
                    break
            s.expect("->", "after computation parameters")
            self.shape()
        self.computation_attrs(comp)
        self.computation_body(comp)
        self.computation_attrs(comp)  # XLA prints execution_thread after the '}'
        return comp, is_entry

    def computation_body(self, comp: Computation) -> None:
        s = self.s
        name = comp.name
        s.expect("{", "to start the computation body")
        by_name: dict[str, Instruction] = {}
        pending: list[tuple[Instruction, str, int, bool]] = []
        root: Instruction | None = None
        while not s.accept("}"):
            if s.at_end():
                raise s.error(f"expected '}}' to end computation '{name}', found end of input")
            instr_pos = s.pos
            outer_created, outer_refs = self.created, self._nested_refs
            self.created, self._nested_refs = [], []
            instr, is_root, refs, name_pos = self.instruction()
            created, self.created = self.created, outer_created
            pending.extend(self._nested_refs)
            self._nested_refs = outer_refs
            if instr.name in by_name:
                raise s.error(f"duplicate instruction name '{instr.name}' in computation '{name}'",
                              name_pos)
            for extra in created:
                by_name[extra.name] = extra
                comp.instructions.append(extra)
            by_name[instr.name] = instr
            comp.instructions.append(instr)
            pending.extend(refs)
            if is_root:
                if root is not None:
                    raise s.error(f"second ROOT instruction in computation '{name}'", instr_pos)
                root = instr
        if not comp.instructions:
            raise s.error(f"computation '{name}' has no instructions", s.pos - 1)
        for instr, ref, pos, is_control in pending:
            if isinstance(ref, Instruction):
                target = ref
            else:
                target = by_name.get(ref)
                if target is None:
                    target = self.tuple_element_operand(comp, by_name, ref, pos)
            if target is None:
                raise s.error(f"unknown instruction '{ref}' in computation '{name}'", pos)
            (instr.control_predecessors if is_control else instr.operands).append(target)
        comp.root = root if root is not None else comp.instructions[-1]

    def tuple_element_operand(self, comp, by_name, ref: str, pos: int):
        """``%x#0#1``: XLA's compact form of get-tuple-element operands; creates the
        get-tuple-element instructions (once per distinct path) after ``%x``."""
        base, *path = ref.split("#")
        target = by_name.get(base)
        if target is None or not path:
            return None
        name = base
        for idx in path:
            name += "_" + idx
            gte = by_name.get(name)
            if gte is None or gte.opcode != "get-tuple-element":
                gte = Instruction(name=name, opcode="get-tuple-element", shape=None,
                                  operands=[target], attrs={"index": int(idx)},
                                  line=target.line)
                self.positions[id(gte)] = pos
                comp.instructions.insert(comp.instructions.index(target) + 1, gte)
                by_name[name] = gte
            target = gte
        return target

    def computation_attrs(self, comp: Computation) -> None:
        s = self.s
        while s.accept(","):
            s.skip_ws()
            key_pos = s.pos
            key = s.expect_ident("computation attribute name")
            s.expect("=", f"after computation attribute '{key}'")
            if key in comp.attrs:
                raise s.error(f"duplicate computation attribute '{key}'", key_pos)
            if s.at('"'):
                comp.attrs[key] = s.string()[0]
            else:
                comp.attrs[key] = self.raw_value()

    # -- instructions --------------------------------------------------------------------
    def instruction(self):
        s = self.s
        s.skip_ws()
        is_root = False
        if s.peek_ident() == "ROOT":
            s.ident()
            is_root = True
        s.skip_ws()
        name_pos = s.pos
        name = self.decl_name()
        if name is None:
            raise s.expected("instruction name or '}'")
        if name in ELEMENT_TYPES:
            raise s.error(f"illegal instruction name '{name}' (it is an element type)", name_pos)
        s.expect("=", f"after instruction name '{name}'")
        instr, refs = self.instruction_rhs(name, allow_attributes=True)
        return instr, is_root, refs, name_pos

    def instruction_rhs(self, name: str | None, allow_attributes: bool):
        """``[shape] opcode(operands), attributes`` (a nested operand instruction has no
        attributes and gets a generated name). Without a shape the shape is inferred
        once the module is read, as XLA's parser does."""
        s = self.s
        s.skip_ws()
        start = s.pos
        line = s.line_col(s.pos)[0]
        shape = self.shape() if self._at_shape() else None
        s.skip_ws()
        op_pos = s.pos
        opcode = s.ident()
        if opcode is None:
            raise s.expected("opcode")
        wrapped = None
        if opcode not in OPCODES:
            for suffix, async_op in _ASYNC_SUFFIXES.items():
                base = opcode[:-len(suffix)]
                if (opcode.endswith(suffix) and base in OPCODES and base not in _DEDICATED_ASYNC
                        and not base.startswith("async-")
                        and not base.endswith(("-start", "-update", "-done"))):
                    opcode, wrapped = async_op, base
                    break
            else:
                raise s.error(f"unknown opcode '{opcode}'", op_pos)
        if shape is None and opcode in _SHAPE_REQUIRED:
            raise s.error(f"'{opcode}' needs its shape written before the opcode (XLA cannot "
                          f"infer it)", op_pos)
        if name is None:
            self.anon += 1
            name = f"{opcode if wrapped is None else wrapped}.anon.{self.anon}"
        instr = Instruction(name=name, opcode=opcode, shape=shape, line=line,
                            async_wrapped_opcode=wrapped)
        if shape is None:
            self.positions[id(instr)] = start
        refs: list[tuple[Instruction, str, int, bool]] = []
        s.expect("(", f"after opcode '{opcode if wrapped is None else wrapped}'")
        if opcode == "constant":
            instr.literal = self.literal(shape)
            s.expect(")", "after constant literal")
        elif opcode == "parameter":
            n_pos = s.pos
            n = s.int_("parameter number")
            if n < 0:
                raise s.error(f"parameter number must be >= 0, found {n}", n_pos)
            instr.parameter_number = n
            s.expect(")", "after parameter number")
        elif not s.accept(")"):
            while True:
                refs.append((instr, *self.operand(instr), False))
                if s.accept(","):
                    continue
                s.expect(")", "after operands")
                break
        seen: set[str] = set()
        while allow_attributes and s.accept(","):
            s.skip_ws()
            key_pos = s.pos
            key = s.ident()
            if key is None:
                raise s.expected("attribute name")
            s.expect("=", f"after attribute name '{key}'")
            if key in seen:
                raise s.error(f"duplicate attribute '{key}'", key_pos)
            seen.add(key)
            if key == CONTROL_PREDECESSORS:
                refs.extend((instr, n, p, True) for n, p in self.name_list(key))
                continue
            instr.attrs[key] = self.attr_value(key)
        return instr, refs

    def operand(self, user: Instruction):
        """``[shape] name['#' index]*`` (a name, returned as text) or a nested
        instruction ``[shape] opcode(...)`` (created, returned as the Instruction)."""
        s = self.s
        s.skip_ws()
        start = s.pos
        if self._at_shape():
            self.shape()
            user.operands_with_shapes = True
            if s.at(",") and not s.at(",)"):
                s.accept(",")  # XLA reads `f32[], %x` as `f32[] %x`
        s.skip_ws()
        pos = s.pos
        ref = s.name()
        if ref is None:
            raise s.expected("operand name")
        while s.peek_char() == "#":
            s.pos += 1
            ref += "#" + str(s.int_("tuple index after '#'"))
        if s.at(",") or s.at(")"):
            return ref, pos
        if "#" in ref or not s.at("("):
            raise s.expected("',' or ')' after operand")
        s.pos = start
        nested, refs = self.instruction_rhs(None, allow_attributes=False)
        self.created.append(nested)
        self._nested_refs.extend(refs)
        return nested, start

    def _at_shape(self) -> bool:
        """Whether the next token starts a shape (vs an operand name)."""
        s = self.s
        text, pos = s.text, s.pos
        if text.startswith("(", pos):
            return True
        m = _WORD_RE.match(text, pos)
        if m is None:
            return False
        nxt = text[m.end():m.end() + 1]
        if nxt.isspace() and m.group() in ELEMENT_TYPES:  # XLA reads `s32 [2]`
            nxt = text[m.end():].lstrip()[:1]
        return nxt == "[" or (m.group() == "b" and nxt == "(")

    def name_list(self, key: str) -> list[tuple[str, int]]:
        s = self.s
        s.expect("{", f"to start '{key}'")
        out = []
        if s.accept("}"):
            return out
        while True:
            s.skip_ws()
            pos = s.pos
            n = s.name()
            if n is None:
                raise s.expected("name")
            out.append((n, pos))
            if s.accept(","):
                continue
            s.expect("}", f"to end '{key}'")
            return out

    # -- attributes ----------------------------------------------------------------------
    def raw_value(self) -> A.Raw:
        s = self.s
        s.skip_ws()
        pos = s.pos
        raw = s.balanced_raw()
        if not raw:
            raise s.expected("attribute value", pos)
        return A.Raw(raw)

    def bool_value(self) -> bool:
        s = self.s
        s.skip_ws()
        pos = s.pos
        v = s.ident()
        if v == "true":
            return True
        if v == "false":
            return False
        raise s.expected("'true' or 'false'", pos)

    def int_list(self, key: str) -> tuple[int, ...]:
        s = self.s
        s.expect("{", f"to start '{key}'")
        out = []
        if s.accept("}"):
            return ()
        while True:
            out.append(s.int_())
            if s.accept(","):
                continue
            s.expect("}", f"to end '{key}'")
            return tuple(out)

    def comp_ref(self) -> A.ComputationRef:
        s = self.s
        s.skip_ws()
        pos = s.pos
        n = s.name()
        if n is None:
            raise s.expected("computation name")
        self.comp_refs.append((n, pos))
        return A.ComputationRef(n)

    def attr_value(self, key: str) -> Any:
        s = self.s
        s.skip_ws()
        text, pos = s.text, s.pos
        if key in INT_LIST_ATTRS:
            if _NESTED_BRACE_RE.match(text, pos):  # e.g. collective-permute slice_sizes
                return self.raw_value()
            return self.int_list(key)
        if key in INT_ATTRS:
            return s.int_()
        if key in BOOL_ATTRS:
            return self.bool_value()
        if key in FLOAT_ATTRS:
            v = s.match(NUMBER_RE)
            if v is None:
                raise s.expected(f"a number for '{key}'")
            return float(v)
        if key in ENUM_ATTRS:
            return A.Enum(s.expect_ident(f"a value for '{key}'"))
        if key in ENUM_LIST_ATTRS:
            s.expect("{", f"to start '{key}'")
            out = []
            if not s.accept("}"):
                while True:
                    out.append(A.Enum(s.expect_ident(f"a value in '{key}'")))
                    if s.accept(","):
                        continue
                    s.expect("}", f"to end '{key}'")
                    break
            return tuple(out)
        if key in STRING_ATTRS:
            return s.string()[0]
        if key in COMP_ATTRS:
            if s.at("{") and self._at_inline_body():
                return self.inline_computation()
            if key == "calls" and s.at("{"):
                return tuple(self.comp_ref_list(key))
            return self.comp_ref()
        if key in COMP_LIST_ATTRS:
            return tuple(self.comp_ref_list(key))
        if key == "window":
            return self.window()
        if key == "dim_labels":
            return self.dim_labels()
        if key == "slice":
            return self.slice_attr()
        if key == "padding":
            v = s.match(_PADDING_RE)
            if v is None:
                raise s.expected("padding like 0_0x1_2_1")
            dims = []
            for part in v.split("x"):
                nums = [int(x) for x in re.findall(r"-?\d+", part)]
                dims.append(A.PaddingDim(*nums))
            return tuple(dims)
        if key == "replica_groups":
            raw = self.raw_value()
            return A.ReplicaGroups(_derive_groups(str(raw)), str(raw))
        if key == "source_target_pairs":
            return self.pairs(key)
        if key in LITERAL_ATTRS and self._at_shape():
            return self.literal_attr(key)
        return self.raw_value()

    def literal_attr(self, key: str) -> A.LiteralAttr:
        s = self.s
        s.skip_ws()
        pos = s.pos
        shape = self.shape()
        if not isinstance(shape, ArrayShape):
            raise s.error(f"'{key}' must hold an array literal, found shape {shape}", pos)
        return A.LiteralAttr(shape, self.literal(shape))

    def _at_inline_body(self) -> bool:
        """At ``{`` that opens instructions (``{ x = ...``, ``{ ROOT ...``), not names."""
        s = self.s
        save = s.pos
        s.expect("{")
        first = s.peek_ident()
        ok = first == "ROOT"
        if not ok and self.decl_name() is not None:
            ok = s.at("=")
        s.pos = save
        return ok

    def inline_computation(self) -> A.ComputationRef:
        """A computation written in place of a name (``to_apply={ ... }``): it becomes a
        computation of the module, named ``_inline.N``."""
        s = self.s
        s.skip_ws()
        pos = s.pos
        self.anon += 1
        comp = Computation(name=f"_inline.{self.anon}")
        self.computation_body(comp)
        self.inline_comps[comp.name] = comp
        self.comp_refs.append((comp.name, pos))
        return A.ComputationRef(comp.name)

    def comp_ref_list(self, key: str) -> list[A.ComputationRef]:
        s = self.s
        s.expect("{", f"to start '{key}'")
        out = []
        if s.accept("}"):
            return out
        while True:
            if s.at("{"):
                out.append(self.inline_computation())
            else:
                out.append(self.comp_ref())
            if s.accept(","):
                continue
            s.expect("}", f"to end '{key}'")
            return out

    def pairs(self, key: str) -> tuple[tuple[int, int], ...]:
        s = self.s
        s.expect("{", f"to start '{key}'")
        out = []
        if s.accept("}"):
            return ()
        while True:
            s.expect("{", "to start a source-target pair")
            a = s.int_()
            s.expect(",", "between source and target")
            b = s.int_()
            s.expect("}", "after source-target pair")
            out.append((a, b))
            if s.accept(","):
                continue
            s.expect("}", f"to end '{key}'")
            return tuple(out)

    def slice_attr(self) -> tuple[A.SliceDim, ...]:
        s = self.s
        s.expect("{", "to start 'slice'")
        out = []
        if s.accept("}"):
            return ()
        while True:
            s.expect("[", "to start a slice dimension")
            start = s.int_()
            s.expect(":", "after slice start")
            limit = s.int_()
            stride = 1
            if s.accept(":"):
                stride = s.int_()
            s.expect("]", "to end a slice dimension")
            out.append(A.SliceDim(start, limit, stride))
            if s.accept(","):
                continue
            s.expect("}", "to end 'slice'")
            return tuple(out)

    def window(self) -> A.Window:
        s = self.s
        s.expect("{", "to start 'window'")
        fields: dict[str, list] = {}
        while not s.accept("}"):
            s.skip_ws()
            kpos = s.pos
            k = s.ident()
            if k is None:
                raise s.expected("window sub-attribute or '}'")
            s.expect("=", f"after window sub-attribute '{k}'")
            if k in fields:
                raise s.error(f"duplicate window sub-attribute '{k}'", kpos)
            if k in ("size", "stride", "lhs_dilate", "rhs_dilate"):
                v = s.match(_DXD_RE)
                if v is None:
                    raise s.expected(f"sizes like 3x3 for '{k}'")
                fields[k] = [int(x) for x in v.split("x")]
            elif k == "pad":
                v = s.match(_PAD_RE)
                if v is None:
                    raise s.expected("padding like 0_1x1_1 for 'pad'")
                fields[k] = [tuple(int(x) for x in re.findall(r"-?\d+", p)) for p in v.split("x")]
            elif k == "rhs_reversal":
                v = s.match(_REVERSAL_RE)
                if v is None:
                    raise s.expected("flags like 0x1 for 'rhs_reversal'")
                fields[k] = [x == "1" for x in v.split("x")]
            else:
                raise s.error(f"unknown window sub-attribute '{k}'", kpos)
            if k != "size" and "size" in fields and len(fields[k]) != len(fields["size"]):
                raise s.error(f"window '{k}' has {len(fields[k])} dimensions but 'size' has "
                              f"{len(fields['size'])}", kpos)
        if not fields:
            return A.Window(())
        if "size" not in fields:
            raise s.error("window has no 'size'", s.pos - 1)
        n = len(fields["size"])
        for k, v in fields.items():
            if len(v) != n:
                raise s.error(f"window '{k}' has {len(v)} dimensions but 'size' has {n}", s.pos - 1)
        dims = []
        for i in range(n):
            pad = fields.get("pad", [(0, 0)] * n)[i]
            dims.append(A.WindowDim(
                size=fields["size"][i], stride=fields.get("stride", [1] * n)[i],
                padding_low=pad[0], padding_high=pad[1],
                window_dilation=fields.get("rhs_dilate", [1] * n)[i],
                base_dilation=fields.get("lhs_dilate", [1] * n)[i],
                window_reversal=fields.get("rhs_reversal", [False] * n)[i]))
        return A.Window(tuple(dims))

    def dim_labels(self) -> A.ConvDimensionNumbers:
        s = self.s
        s.skip_ws()
        pos = s.pos
        v = s.match(_DIM_LABELS_RE)
        if v is None:
            raise s.expected("dim_labels like b01f_01io->b01f")
        lhs, rest = v.split("_", 1)
        rhs, out = rest.split("->")

        def positions(part: str, a: str, b: str, what: str):
            if part.count(a) != 1 or part.count(b) != 1:
                raise s.error(f"dim_labels {what} '{part}' needs exactly one '{a}' and one '{b}'", pos)
            digits = [c for c in part if c.isdigit()]
            n = len(part) - 2 - part.count("?")
            if sorted(digits) != [str(i) for i in range(n)]:
                raise s.error(f"dim_labels {what} '{part}' must name spatial dimensions 0..{n - 1} "
                              f"once each", pos)
            return part.index(a), part.index(b), tuple(part.index(str(i)) for i in range(n))

        ib, if_, isp = positions(lhs, "b", "f", "input")
        ki, ko, ksp = positions(rhs, "i", "o", "kernel")
        ob, of, osp = positions(out, "b", "f", "output")
        if not (len(isp) == len(ksp) == len(osp)):
            raise s.error("dim_labels parts have different numbers of spatial dimensions", pos)
        return A.ConvDimensionNumbers(ib, if_, isp, ki, ko, ksp, ob, of, osp, labels=v)

    # -- shapes --------------------------------------------------------------------------
    def shape_list(self, what: str) -> tuple[Shape, ...]:
        """``shape, shape, ... )`` after an opening parenthesis."""
        s = self.s
        shapes = []
        if not s.accept(")"):
            while True:
                shapes.append(self.shape())
                if s.accept(","):
                    continue
                s.expect(")", what)
                break
        return tuple(shapes)

    def shape(self) -> Shape:
        s = self.s
        s.skip_ws()
        if s.accept("("):
            return TupleShape(self.shape_list("after tuple element shapes"))
        pos = s.pos
        name = s.ident()
        if name is None:
            raise s.expected("shape")
        if name == "b" and s.peek_char() == "(":
            s.pos += 1
            inner_pos = s.pos
            inner = self.shape()
            if not isinstance(inner, ArrayShape):
                raise s.error("buffer shape b(...) must hold an array shape", inner_pos)
            s.expect(")", "after buffer shape")
            return BufferShape(inner)
        et = ELEMENT_TYPES.get(name)
        if et is None:
            raise s.error(f"unknown element type '{name}'", pos)
        s.expect("[", f"after element type '{name}'")
        dims: list[int] = []
        dynamic: list[bool] = []
        if not s.accept("]"):
            while True:
                if s.accept("<="):
                    dims.append(s.int_("dimension bound"))
                    dynamic.append(True)
                elif s.accept("?"):
                    dims.append(UNBOUNDED)
                    dynamic.append(True)
                else:
                    dpos = s.pos
                    d = s.int_("dimension size")
                    if d < 0:
                        raise s.error(f"negative dimension size {d}", dpos)
                    dims.append(d)
                    dynamic.append(False)
                if s.accept(","):
                    continue
                s.expect("]", "after dimensions")
                break
        if et.name == "token":
            if dims:
                raise s.error("token shape must be written token[]", pos)
            return TokenShape()
        if et.kind == "opaque":
            if dims:
                raise s.error("opaque shape must be written opaque[]", pos)
            return OpaqueShape()
        layout = None
        if self._at_layout():
            layout = self.layout(len(dims))
        return ArrayShape(et, tuple(dims), tuple(dynamic), layout)

    def _at_layout(self) -> bool:
        s = self.s
        save = s.pos
        s.skip_ws()
        if not s.text.startswith("{", s.pos):
            s.pos = save
            return False
        s.pos += 1
        s.skip_ws()
        c = s.peek_char()
        s.pos = save
        return c.isdigit() or c in ("}", ":")

    def layout(self, rank: int) -> Layout:
        s = self.s
        s.expect("{", "to start layout")
        m2m: list[int] = []
        if not s.at(":") and not s.at("}"):
            while True:
                m2m.append(s.int_("layout dimension"))
                if s.accept(","):
                    continue
                break
        tiles: list[tuple[int, ...]] = []
        esb = 0
        ms = 0
        other: list[tuple[str, str]] = []
        if s.accept(":"):
            while not s.at("}"):
                s.skip_ws()
                if s.accept("SC"):
                    letter = "SC"
                else:
                    letter = s.peek_char()
                    if letter not in "DTL#*ESPM" or not letter:
                        raise s.expected("layout suffix (D, T, L, #, *, E, S, SC, P, M) or '}'")
                    s.pos += 1
                if letter == "T":
                    if not s.at("("):
                        raise s.expected("'(' after 'T' in layout")
                    while s.accept("("):
                        tile: list[int] = []
                        if not s.accept(")"):
                            while True:
                                if s.accept("*"):
                                    tile.append(-1)
                                else:
                                    tile.append(s.int_("tile dimension"))
                                if s.accept(","):
                                    continue
                                s.expect(")", "after tile dimensions")
                                break
                        tiles.append(tuple(tile))
                elif letter in ("E", "S"):
                    s.expect("(", f"after '{letter}' in layout")
                    v = s.int_()
                    s.expect(")", f"after '{letter}(' value in layout")
                    if letter == "E":
                        esb = v
                    else:
                        ms = v
                else:
                    s.expect("(", f"after '{letter}' in layout")
                    inner = s.balanced_raw(stop_at_newline=False, stop_at_comma=False)
                    s.expect(")", f"after '{letter}(' in layout")
                    other.append((letter, inner))
        s.expect("}", "to end layout")
        if m2m and len(m2m) != rank:
            raise s.error(f"layout has {len(m2m)} dimensions but the shape has rank {rank}", s.pos - 1)
        if m2m and sorted(m2m) != list(range(rank)):
            raise s.error(f"layout {{{','.join(map(str, m2m))}}} is not a permutation of 0..{rank - 1}",
                          s.pos - 1)
        if not m2m and rank:
            raise s.error(f"layout has no dimensions but the shape has rank {rank}", s.pos - 1)
        return Layout(tuple(m2m), tuple(tiles), esb, ms, tuple(other))

    # -- literals ------------------------------------------------------------------------
    def literal(self, shape: Shape):
        s = self.s
        s.skip_ws()
        save = s.pos
        if s.accept("{") and s.accept("...") and s.accept("}"):
            return None
        s.pos = save
        if isinstance(shape, TupleShape):
            s.expect("(", "to start tuple literal")
            elems = []
            for i, es in enumerate(shape.elements):
                if i:
                    s.expect(",", f"between tuple literal elements (tuple has {len(shape.elements)})")
                elems.append(self.literal(es))
            s.expect(")", f"after {len(shape.elements)} tuple literal elements")
            return tuple(elems)
        if not isinstance(shape, ArrayShape):
            raise s.error(f"constant of shape {shape} cannot have a literal", save)
        et = shape.element_type
        if any(d == UNBOUNDED for d in shape.dims):
            raise s.error("constant with an unbounded dimension", save)
        items: list[tuple[int, str, Any]] = []
        if shape.rank and not s.at("{"):
            # XLA reads one value for an array constant as its first element, the
            # others zero (``s32[2,2] constant(3)`` is {{3, 0}, {0, 0}}).
            first = self.scalar_token(et)
            zero = (first[0], "bool", False) if et.kind == "pred" else (first[0], "int", "0")
            n = math.prod(max(d, 0) for d in shape.dims)
            return self.convert([first] + [zero] * (n - 1) if n else [], shape)
        if shape.rank == 0:
            items.append(self.scalar_token(et))
        else:
            self.nested(shape.dims, 0, items)
        return self.convert(items, shape)

    def nested(self, dims, level: int, items: list) -> None:
        s = self.s
        s.skip_ws()
        open_pos = s.pos
        s.expect("{", f"to start dimension {level} of the literal (rank {len(dims)})")
        n = 0
        if level == len(dims) - 1:
            if not s.accept("}"):
                while True:
                    items.append(self.scalar_token(None))
                    n += 1
                    if s.accept(","):
                        continue
                    s.expect("}", f"after literal elements of dimension {level}")
                    break
        else:
            if not s.accept("}"):
                while True:
                    if not s.at("{"):
                        raise s.expected(f"'{{' for dimension {level + 1} of the literal "
                                         f"(rank {len(dims)})")
                    self.nested(dims, level + 1, items)
                    n += 1
                    if s.accept(",") or s.at("{"):  # XLA tolerates a missing ','
                        continue
                    s.expect("}", f"after literal elements of dimension {level}")
                    break
        if n != dims[level]:
            raise s.error(f"literal dimension {level} has {n} elements, but the shape says "
                          f"{dims[level]}", open_pos)

    def scalar_token(self, et: ElementType | None) -> tuple[int, str, Any]:
        """One literal element: (position, kind, value); kinds bool/int/float/nan/complex."""
        s = self.s
        s.skip_ws()
        pos = s.pos
        text = s.text
        if text.startswith("(", pos):
            s.pos += 1
            re_ = self.scalar_token(None)
            s.expect(",", "between real and imaginary parts")
            im = self.scalar_token(None)
            s.expect(")", "after imaginary part")
            for part in (re_, im):
                if part[1] not in ("int", "float", "nan"):
                    raise s.error("complex parts must be numbers", part[0])
            return pos, "complex", (re_, im)
        m = _NAN_RE.match(text, pos)
        if m and (m.group(1) or not _IDENT_CHAR.match(text, m.end())):
            s.pos = m.end()
            neg = m.group().startswith("-")
            payload = int(m.group(1), 16) if m.group(1) else None
            return pos, "nan", (neg, payload)
        for word, kind, value in (("true", "bool", True), ("false", "bool", False),
                                  ("inf", "float", math.inf), ("-inf", "float", -math.inf)):
            if text.startswith(word, pos) and not _IDENT_CHAR.match(text, pos + len(word)):
                s.pos = pos + len(word)
                return pos, kind, value
        m = NUMBER_RE.match(text, pos)
        if m is None or _AFTER_NUMBER_RE.match(text, m.end()):
            raise s.expected("literal value")
        s.pos = m.end()
        t = m.group()
        if _INT_TEXT_RE.fullmatch(t):
            return pos, "int", t
        return pos, "float", t

    def convert(self, items: list, shape: ArrayShape) -> np.ndarray:
        s = self.s
        et = shape.element_type
        dims = tuple(max(d, 0) for d in shape.dims)
        kind = et.kind
        if kind == "pred":
            vals = []
            for pos, k, v in items:
                if k == "bool":
                    vals.append(v)
                elif k == "int":
                    vals.append(int(v) != 0)
                else:
                    raise s.error(f"expected true, false or an integer for pred, found {s.describe(pos)}", pos)
            return np.array(vals, dtype=np.bool_).reshape(dims)
        if kind in ("sint", "uint"):
            lo, hi = et.min_value, et.max_value
            vals = []
            for pos, k, v in items:
                if k != "int":
                    raise s.error(f"expected an integer for {et.name}, found {s.describe(pos)}", pos)
                v = int(v)
                if et.bits == 64 and -(1 << 63) <= v < (1 << 64):
                    v &= (1 << 64) - 1  # XLA reads 64-bit literals modulo 2^64
                    if kind == "sint" and v > hi:
                        v -= 1 << 64
                if not lo <= v <= hi:
                    raise s.error(f"value {v} is out of range for {et.name} [{lo}, {hi}]", pos)
                vals.append(v)
            wide = np.int64 if kind == "sint" else np.uint64
            return np.array(vals, dtype=wide).astype(et.dtype).reshape(dims)
        if kind == "float":
            return self.float_array(items, et, dims)
        if kind == "complex":
            part = ELEMENT_TYPES["f32" if et.name == "c64" else "f64"]
            reals, imags = [], []
            for pos, k, v in items:
                if k == "complex":
                    reals.append(v[0])
                    imags.append(v[1])
                elif k in ("int", "float"):
                    reals.append((pos, k, v))
                    imags.append((pos, "int", "0"))
                else:
                    raise s.error(f"expected (real, imag) for {et.name}, found {s.describe(pos)}", pos)
            r = self.float_array(reals, part, dims)
            i = self.float_array(imags, part, dims)
            out = np.empty(dims, dtype=et.dtype)
            out.real = r
            out.imag = i
            return out
        raise s.error(f"element type {et.name} cannot have a literal", items[0][0] if items else s.pos)

    def float_array(self, items: list, et: ElementType, dims) -> np.ndarray:
        s = self.s
        info = float_info(et)
        vals = np.empty(len(items), dtype=np.float64)
        overrides: list[tuple[int, int]] = []
        for idx, (pos, k, v) in enumerate(items):
            if k in ("int", "float"):
                f = float(v)
                if math.isinf(f) and isinstance(v, str):
                    raise s.error(f"value {v} is out of range for {et.name}", pos)
            elif k == "nan":
                try:
                    bits = info.nan_with_payload(*v)
                except ValueError as e:
                    raise s.error(str(e), pos) from None
                overrides.append((idx, bits))
                f = 0.0
            else:
                raise s.error(f"expected a number for {et.name}, found {s.describe(pos)}", pos)
            if math.isfinite(f) and abs(f) >= info.threshold:
                raise s.error(f"value {v} is out of range for {et.name}", pos)
            if math.isinf(f) and not et.float_format.has_nan:
                raise s.error(f"{et.name} has no infinity or NaN", pos)
            vals[idx] = f
        with np.errstate(all="ignore"):
            arr = vals.astype(et.dtype)
        if et.float_format.nan_style in ("e8m0", "none") or not et.float_format.has_inf:
            bad = np.isnan(arr.astype(np.float64)) & np.isfinite(vals)
            if bad.any():
                pos, _, v = items[int(np.argmax(bad))]
                raise s.error(f"value {v} cannot be represented in {et.name}", pos)
        if overrides:
            view = arr.view(info.udtype)
            for idx, bits in overrides:
                view[idx] = bits
        return arr.reshape(dims)

    def parse_all(self, fn):
        s = self.s
        try:
            value = fn()
            if not s.at_end():
                raise s.expected("end of input")
            return value
        except HloParseError:
            raise
        except RecursionError:
            raise s.error("input nested too deeply") from None
        except Exception as e:  # safety net: never leak another exception type
            raise s.error(f"internal parser error: {type(e).__name__}: {e}") from e


def _derive_groups(raw: str) -> tuple[tuple[int, ...], ...] | None:
    """Explicit groups for the legacy ``{{0,1},{2,3}}`` and iota ``[G,S]<=[...]`` forms."""
    t = re.sub(r"\s+", "", raw)
    if re.fullmatch(r"\{(?:\{[\d,]*\}(?:,\{[\d,]*\})*)?\}", t):
        groups = re.findall(r"\{([\d,]*)\}", t[1:-1]) if len(t) > 2 else []
        out = []
        for g in groups:
            if g and not re.fullmatch(r"\d+(?:,\d+)*", g):
                return None
            out.append(tuple(int(x) for x in g.split(",")) if g else ())
        return tuple(out)
    m = _IOTA_GROUPS_RE.fullmatch(t)
    if m:
        g, size = int(m.group(1)), int(m.group(2))
        try:
            reshape = [int(x) for x in m.group(3).split(",")]
            n = math.prod(reshape)
            if n != g * size or n > 1 << 20:
                return None
            ids = np.arange(n).reshape(reshape)
            if m.group(4) is not None:
                perm = [int(x) for x in m.group(4).split(",")] if m.group(4) else []
                if sorted(perm) != list(range(len(reshape))):
                    return None
                ids = ids.transpose(perm)
            ids = ids.reshape(g, size)
        except ValueError:
            return None
        return tuple(tuple(int(x) for x in row) for row in ids)
    return None


def infer_missing_shapes(module: Module, positions: dict, scanner) -> None:
    """Give every instruction written without a shape the shape XLA's parser infers:
    callees first, operands before users."""
    from .shape_inference import ShapeError, infer_shape
    if not positions:
        return
    done: set[str] = set()
    active: set[str] = set()

    def fail(instr, message):
        return scanner.error(f"cannot infer the shape of '{instr.name}' ({instr.opcode}): "
                             f"{message}", positions.get(id(instr)))

    def program(ref: str):
        comp_ = module.computations[str(ref)]
        visit(comp_)
        return tuple(p.shape for p in comp_.parameters), comp_.root.shape

    def infer(instr, stack: set):
        if instr.shape is not None:
            return
        if id(instr) in stack:
            raise fail(instr, "its operands depend on it")
        stack.add(id(instr))
        for o in instr.operands:
            infer(o, stack)
        called = {}
        for key, value in instr.attrs.items():
            if isinstance(value, A.ComputationRef):
                called[key] = program(value)
            elif isinstance(value, tuple) and value and all(isinstance(v, A.ComputationRef) for v in value):
                called[key] = [program(v) for v in value]
        shapes = [o.shape for o in instr.operands]
        try:
            if instr.opcode == "broadcast":
                # XLA infers broadcast(x), dimensions=D as shape D ++ x's dimensions.
                op = shapes[0] if len(shapes) == 1 else None
                if not isinstance(op, ArrayShape):
                    raise ShapeError("broadcast takes one array operand")
                dims = tuple(instr.attrs.get("dimensions", ())) + op.dims
                instr.shape = ArrayShape(op.element_type, dims, (False,) * len(dims), None)
            else:
                instr.shape = infer_shape(instr.opcode, shapes, instr.attrs, called)
        except ShapeError as e:
            raise fail(instr, str(e)) from None
        except (TypeError, ValueError, KeyError, IndexError, AttributeError) as e:
            raise fail(instr, f"malformed operands or attributes ({type(e).__name__}: {e})") from None
        stack.discard(id(instr))

    def visit(comp: Computation):
        if comp.name in done:
            return
        if comp.name in active:
            raise scanner.error(f"computation '{comp.name}' calls itself")
        active.add(comp.name)
        for instr in comp.instructions:
            infer(instr, set())
        active.discard(comp.name)
        done.add(comp.name)

    for comp in list(module.computations.values()):
        visit(comp)


def parse_module(text: str, filename: str | None = None) -> Module:
    """Parse HLO module text (as XLA prints it) into a ``Module``."""
    p = _Parser(text, filename)
    return p.parse_all(p.module)


def parse_shape(text: str) -> Shape:
    """Parse one shape, e.g. ``f32[2,<=3]{1,0}`` or ``(s32[], token[])``."""
    p = _Parser(text)
    return p.parse_all(p.shape)


def parse_literal(text: str, shape: Shape | str):
    """Parse a literal (what goes inside ``constant(...)``) of ``shape``."""
    if isinstance(shape, str):
        shape = parse_shape(shape)
    p = _Parser(text)
    return p.parse_all(lambda: p.literal(shape))
