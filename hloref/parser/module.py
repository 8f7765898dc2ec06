"""Modules, computations and instructions: the top layer of the HLO parser, and the
shape inference pass for instructions written without a shape."""

from __future__ import annotations

from typing import Any

from .. import attrs as A
from ..ir import Computation, Instruction, Module, ProgramShape
from ..opcodes import CATALOGUE, DEDICATED_ASYNC, SHAPE_INFERABLE
from ..shapes import ArrayShape
from ..types import ELEMENT_TYPES
from .attributes import CONTROL_PREDECESSORS, AttributeParser

#: Every opcode hloref knows: the catalogue's (``hloref/opcodes.py``), which is XLA's
#: ``HLO_OPCODE_LIST`` (``xla/hlo/ir/hlo_opcode.h``) plus the few newer names it lists.
OPCODES = frozenset(CATALOGUE)

#: Opcodes with their own start/done opcodes: never async-wrapped in text.
_DEDICATED_ASYNC = DEDICATED_ASYNC
_ASYNC_SUFFIXES = {"-start": "async-start", "-update": "async-update", "-done": "async-done"}

#: Opcodes whose result shape the text may leave out: SHAPE_INFERABLE, the catalogue's
#: ``inferable`` group (``CanInferShape`` in ``xla/hlo/parser/hlo_parser.cc``).
_SHAPE_REQUIRED = OPCODES - SHAPE_INFERABLE

#: Sections XLA may print between the header and the first computation.
SECTION_TITLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")


class ModuleParser(AttributeParser):
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
            key, _ = self.keyword("module attribute", module.attrs)
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
        self.check_signature_results()
        return module

    @property
    def signature_results(self) -> list:
        if not hasattr(self, "_signature_results"):
            self._signature_results = []
        return self._signature_results

    def check_signature_results(self) -> None:
        """A ``(params) -> shape`` signature's result must be compatible with the root's
        shape (layouts aside), as XLA's parser requires; its parameter list is not checked
        (XLA ignores it)."""
        from ..printer import shape_to_text
        from ..shape_inference import same_shape
        for comp, shape, pos in self.signature_results:
            root = comp.root
            if root is None or root.shape is None or same_shape(shape, root.shape):
                continue
            raise self.s.error(f"shape of computation {comp.name}, {shape_to_text(shape, False)}, "
                               f"is not compatible with that of its root instruction "
                               f"{root.name}, {shape_to_text(root.shape, False)}", pos)

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
            s.skip_ws()
            result_pos = s.pos
            self.signature_results.append((comp, self.shape(), result_pos))
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
            key, _ = self.keyword("computation attribute", comp.attrs)
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
                if opcode in ELEMENT_TYPES:  # a shape without its dimensions
                    raise s.expected(f"'[' after element type '{opcode}' (a shape is written "
                                     f"{opcode}[2,3], a scalar {opcode}[])")
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
            key, _ = self.keyword("attribute", seen)
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


def infer_missing_shapes(module: Module, positions: dict, scanner) -> None:
    """Give every instruction written without a shape the shape XLA's parser infers:
    callees first, operands before users."""
    from ..shape_inference import ShapeError, infer_shape
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
