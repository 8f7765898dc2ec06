"""Structural and shape verification of a parsed HLO ``Module``.

``verify_module(module)`` raises ``HloVerifyError`` on the first problem;
``verify_module(module, collect=True)`` returns every problem found (at most one
per instruction). Checked:

* the opcode is known and has the right number of operands
  (``xla/hlo/ir/hlo_opcode.h`` arities, plus per-op minimums for variadic ops);
* required attributes are present (``REQUIRED_ATTRS``); their values are in range
  (checked by ``hloref.shape_inference``: dimensions within rank, permutations,
  slice bounds and strides, tuple indices, iota_dimension, ...);
* called computations exist and take the right number of parameters;
* each computation has a root and parameter numbers 0..n-1 without gaps or
  duplicates;
* the declared shape equals the inferred one: dims and element type, layouts and
  dynamic-dimension markers ignored. Where the operands leave the result element
  type (or dims) free, ``shape_inference.FREE_PARTS`` takes them from the
  declaration, so only what the operands determine is compared;
* ``entry_computation_layout`` (when parsed into a ``ProgramShape``) agrees with
  the entry computation's parameters and root.
"""

from __future__ import annotations

from typing import Any

from .attrs import ComputationRef
from .errors import HloVerifyError
from .ir import Computation, Instruction, Module
from .op_properties import opcodes_with
from .opcodes import CATALOGUE, MIN_OPERANDS, REQUIRED_ATTRS, VARIADIC
from .shape_inference import DECLARED, ShapeError, infer_shape, same_shape, shape_str
from .shapes import ArrayShape, TupleShape

__all__ = ["verify_module", "verify_computation", "OPCODE_ARITY", "MIN_OPERANDS",
           "REQUIRED_ATTRS", "KNOWN_OPCODES"]

#: Opcode → operand count (``None``: variadic), from the catalogue (``hloref/opcodes.py``:
#: XLA's ``HLO_OPCODE_LIST`` arities).
OPCODE_ARITY: dict[str, int | None] = {op: None if info.arity == VARIADIC else info.arity
                                       for op, info in CATALOGUE.items()}
KNOWN_OPCODES = frozenset(CATALOGUE)
# MIN_OPERANDS (variadic opcodes' fewest operands; shape inference checks the rest) and
# REQUIRED_ATTRS (``HloParser::CreateInstruction``'s required attributes) are the
# catalogue's, re-exported.


#: Collectives whose group mode reads use_global_device_ids (XLA's
#: GetCollectiveOpGroupMode(instr)); the others pass nullopt.
_GLOBAL_IDS_OPS = opcodes_with("global-device-ids-mode")
#: Collectives whose replica groups are checked before shape inference.
_GROUPS_CHECKED = opcodes_with("replica-groups-checked")


def _expected_params(instr: Instruction, attr: str) -> int | None:
    """How many parameters the computation named by ``attr`` must take (None: unchecked)."""
    op, n = instr.opcode, len(instr.operands)
    if attr == "to_apply":
        if op in ("call", "map"):
            return n
        if op in ("reduce", "reduce-window"):
            return n  # 2 * (n // 2)
        if op == "sort":
            return 2 * n
        if op == "scatter":
            return 2 * ((n - 1) // 2)
        if op == "collective-reduce":
            return 2
        # all-reduce, reduce-scatter: XLA's verifier does not look at the reducer
        return None
    # fusion: fewer parameters than operands is allowed (the shape rule checks);
    # async-start: see _Verifier.check_async_start
    if attr in ("condition", "body"):
        return 1
    if attr in ("true_computation", "false_computation", "branch_computations"):
        return 1
    if attr in ("select", "scatter") and op == "select-and-scatter":
        return 2
    return None


def _program_shape(comp: Computation):
    return tuple(p.shape for p in comp.parameters), comp.root.shape


class _Verifier:
    def __init__(self, module: Module, collect: bool):
        self.module = module
        self.collect = collect
        self.errors: list[HloVerifyError] = []

    def fail(self, message: str, comp: Computation | None = None,
             instr: Instruction | None = None) -> None:
        err = HloVerifyError(message, instruction=instr.name if instr else None,
                             computation=comp.name if comp else None,
                             line=instr.line if instr else None)
        if not self.collect:
            raise err
        self.errors.append(err)

    # ------------------------------------------------------------------ module
    def run(self) -> list[HloVerifyError]:
        m = self.module
        if m.entry_name is None or m.entry_name not in m.computations:
            self.fail(f"module {m.name} has no entry computation"
                      + (f" (entry {m.entry_name!r} not found)" if m.entry_name else ""))
        for comp in m.computations.values():
            self.check_computation(comp)
        if m.entry_name in m.computations:
            self.check_entry_layout(m.computations[m.entry_name])
        return self.errors

    def check_entry_layout(self, entry: Computation) -> None:
        layout = self.module.attrs.get("entry_computation_layout")
        if layout is None or not (hasattr(layout, "parameters") and hasattr(layout, "result")):
            return
        params = entry.parameters
        if len(layout.parameters) != len(params):
            self.fail(f"entry_computation_layout has {len(layout.parameters)} parameters but the "
                      f"entry computation has {len(params)}", entry)
            return
        for i, (want, p) in enumerate(zip(layout.parameters, params)):
            if not same_shape(want, p.shape):
                self.fail(f"entry_computation_layout parameter {i} is {shape_str(want)} but "
                          f"parameter {i} is {shape_str(p.shape)}", entry, p)
                return
        if entry.root is not None and not same_shape(layout.result, entry.root.shape):
            self.fail(f"entry_computation_layout result is {shape_str(layout.result)} but the "
                      f"root returns {shape_str(entry.root.shape)}", entry, entry.root)

    # ------------------------------------------------------------------ computation
    def check_computation(self, comp: Computation) -> None:
        if comp.root is None:
            self.fail("computation has no root instruction", comp)
        params = [i for i in comp.instructions if i.opcode == "parameter"]
        n = len(params)
        first: dict[int, Instruction] = {}
        for p in params:
            number = p.parameter_number
            if number is None or number < 0:
                self.fail(f"parameter has invalid number {number}", comp, p)
                return
            if number in first:
                self.fail(f"parameter number {number} is used more than once (also by "
                          f"%{first[number].name})", comp, p)
                return
            first[number] = p
        for p in params:  # n distinct numbers all below n: exactly 0..n-1
            if p.parameter_number >= n:
                missing = [k for k in range(n) if k not in first][:8]
                self.fail(f"parameter number {p.parameter_number} is out of range: computation "
                          f"{comp.name} has {n} parameter(s), numbered 0..{n - 1} (missing "
                          f"{missing})", comp, p)
                return
        names: set[str] = set()
        for instr in comp.instructions:
            if instr.name in names:
                self.fail(f"duplicate instruction name %{instr.name}", comp, instr)
                continue
            names.add(instr.name)
            self.check_instruction(comp, instr)

    # ------------------------------------------------------------------ instruction
    def check_instruction(self, comp: Computation, instr: Instruction) -> None:
        op = instr.opcode
        if op not in KNOWN_OPCODES:
            self.fail(f"unknown opcode '{op}'", comp, instr)
            return
        n = len(instr.operands)
        arity = OPCODE_ARITY[op]
        if arity is not None and n != arity:
            self.fail(f"{op} expects {arity} operand{'s' if arity != 1 else ''}, got {n}",
                      comp, instr)
            return
        if arity is None and n < MIN_OPERANDS.get(op, 0):
            self.fail(f"{op} expects at least {MIN_OPERANDS[op]} operand(s), got {n}", comp, instr)
            return
        # sugared `X-start(...)` carries X's attributes, not `calls`
        required = () if instr.async_wrapped_opcode else REQUIRED_ATTRS.get(op, ())
        for a in required:
            if a not in instr.attrs:
                self.fail(f"{op} is missing required attribute {a}", comp, instr)
                return
        if op == "broadcast" and "dimensions" not in instr.attrs and n == 1 and \
                not (isinstance(instr.operands[0].shape, ArrayShape)
                     and instr.operands[0].shape.rank == 0):
            self.fail("broadcast is missing required attribute dimensions", comp, instr)
            return
        if op == "parameter" and instr.parameter_number is None:
            self.fail("parameter has no parameter number", comp, instr)
            return
        called = self.resolve_called(comp, instr)
        if called is None:
            return
        if op == "async-start" and not instr.async_wrapped_opcode:
            self.check_async_start(comp, instr)
            return
        if op in _GROUPS_CHECKED and self.replica_groups(comp, instr) is False:
            return
        if op == "all-to-all" and not self.check_all_to_all(comp, instr):
            return
        if op in ("collective-permute", "collective-permute-start") and \
                not self.check_source_target_pairs(comp, instr):
            return
        if op in DECLARED:
            return
        attrs = instr.attrs
        if op == "map":
            # XLA's HandleMap infers with dimensions {0..rank-1}, whatever the attribute says
            attrs = {k: v for k, v in attrs.items() if k != "dimensions"}
        elif op == "rng-bit-generator" and not isinstance(instr.shape, TupleShape):
            return  # XLA's HandleRngBitGenerator checks only the (state, bits) tuple form
        elif op in ("all-gather", "reduce-scatter"):
            shards = self.shard_count(comp, instr)
            if shards is False:
                return
            if shards is not None:
                attrs = {**attrs, "shard_count": shards}

        try:
            inferred = infer_shape(op, [o.shape for o in instr.operands], attrs, called,
                                   declared=instr.shape)
        except ShapeError as e:
            self.fail(str(e), comp, instr)
            return
        except (TypeError, ValueError, KeyError, IndexError, AttributeError) as e:
            self.fail(f"{op}: malformed attributes or operands ({type(e).__name__}: {e})",
                      comp, instr)
            return
        if not same_shape(inferred, instr.shape):
            self.fail(f"{op}: declared shape {shape_str(instr.shape)} does not match the inferred "
                      f"shape {shape_str(inferred)}", comp, instr)

    def check_async_start(self, comp: Computation, instr: Instruction) -> None:
        """XLA's ``CheckAsyncStartOperands`` and ``CheckAsyncOpComputationShapes``: the
        operands are the elements of the shape at index {0}, a prefix of the called
        computation's parameters (the rest may be bound later by ``async-update``)."""
        ref = instr.attrs.get("calls")
        callee = self.module.computations.get(str(ref)) if ref is not None else None
        if callee is None:
            return
        params = callee.parameters
        n = len(instr.operands)
        shape = instr.shape
        bound = shape.elements[0] if isinstance(shape, TupleShape) and shape.elements else None
        if not isinstance(bound, TupleShape):
            self.fail(f"async-start: the shape at index {{0}} must be the tuple of the bound "
                      f"operands, got {shape_str(shape)}", comp, instr)
            return
        if n > len(params) or len(bound.elements) != n:
            self.fail(f"async-start has {n} operand(s) and its shape at index {{0}} lists "
                      f"{len(bound.elements)}: calls=%{ref} takes {len(params)} parameter(s), "
                      f"expected {n}", comp, instr)
            return
        for i, (o, b, p) in enumerate(zip(instr.operands, bound.elements, params)):
            if not same_shape(o.shape, b) or not same_shape(b, p.shape):
                self.fail(f"async-start: operand {i} is {shape_str(o.shape)}, its shape at index "
                          f"{{0, {i}}} is {shape_str(b)} and parameter {i} of %{ref} is "
                          f"{shape_str(p.shape)}; all three must agree", comp, instr)
                return

    def shard_count(self, comp: Computation, instr: Instruction):
        """The shard count of an all-gather / reduce-scatter as XLA's verifier takes it
        (``CheckCommonAllGatherInvariants``, ``HandleReduceScatter``): the ceiling of the
        declared and operand sizes' ratio along the dimension, which must equal the
        participant count of a replica group (``GetSubgroupSize``) unless that is 1
        (the replica_count and num_partitions of the module header both 1, say). None
        when unknown (the shape rule then checks what it can); False after a failure."""
        op = instr.opcode
        dims = instr.attrs.get("dimensions")
        if not instr.operands or not isinstance(dims, (list, tuple)) or len(dims) != 1:
            return None
        d = int(dims[0])
        src = instr.operands[0].shape
        out = instr.shape
        if len(instr.operands) > 1:
            out = out.elements[0] if isinstance(out, TupleShape) and out.elements else None
        if not (isinstance(src, ArrayShape) and isinstance(out, ArrayShape)
                and 0 <= d < min(src.rank, out.rank)):
            return None
        num, den = (out.dims[d], src.dims[d]) if op == "all-gather" else (src.dims[d], out.dims[d])
        if den <= 0:
            return None
        shards = -(-num // den)
        if shards <= 0:
            return None
        size = self.subgroup_size(comp, instr)
        if size is False:
            return False
        if size is not None and size != 1 and shards != size:
            self.fail(f"{op}: the declared shape has {shards} shard(s) along dimension {d} "
                      f"({shape_str(src)} -> {shape_str(out)}), but each replica group has "
                      f"{size} participants", comp, instr)
            return False
        return shards

    def group_mode(self, comp: Computation, instr: Instruction) -> str | None:
        """XLA's ``GetCollectiveOpGroupMode``: "replica", "partition",
        "replica-and-partition" or "flattened" from ``channel_id`` and (for all-gather,
        all-reduce, reduce-scatter) ``use_global_device_ids``; None after a failure."""
        channel = instr.attrs.get("channel_id") is not None
        if instr.opcode not in _GLOBAL_IDS_OPS:
            return "partition" if channel else "replica"
        global_ids = instr.attrs.get("use_global_device_ids") is True
        if not channel:
            if global_ids:
                self.fail(f"{instr.opcode}: use_global_device_ids=true needs a channel_id",
                          comp, instr)
                return None
            return "replica"
        return "flattened" if global_ids else "replica-and-partition"

    def replica_groups(self, comp: Computation, instr: Instruction):
        """The explicit groups (() when none are given, None when not derivable), after
        XLA's ``CheckReplicaGroups``: no empty group, each id 0..n-1 once, n the replica
        count, partition count or their product as the group mode says (unless that is
        1), groups of one size (all-reduce excepted), groups given in flattened mode.
        False after a failure."""
        m, op = self.module, instr.opcode
        mode = self.group_mode(comp, instr)
        if mode is None:
            return False
        rg = instr.attrs.get("replica_groups")
        groups = getattr(rg, "groups", None) if rg is not None else ()
        if groups is None:
            return None
        if not groups:
            if mode == "flattened":
                self.fail(f"{op}: replica_groups must be given with use_global_device_ids=true",
                          comp, instr)
                return False
            return ()
        ids = [i for g in groups for i in g]
        n = len(ids)
        if any(not g for g in groups):
            self.fail(f"{op}: replica_groups has an empty group", comp, instr)
            return False
        seen: set[int] = set()
        for i in ids:
            if not 0 <= i < n or i in seen:
                self.fail(f"{op}: replica id {i} is " + ("repeated" if i in seen else
                          f"out of range [0, {n})") + " in replica_groups (each id 0..n-1 once, "
                          f"n = {n} ids in all)", comp, instr)
                return False
            seen.add(i)
        want, what = {"replica": (m.replica_count, "replica_count"),
                      "replica-and-partition": (m.replica_count, "replica_count"),
                      "partition": (m.num_partitions, "num_partitions"),
                      "flattened": (m.replica_count * m.num_partitions,
                                    "replica_count x num_partitions")}[mode]
        if want != 1 and n != want:
            self.fail(f"{op}: replica_groups name {n} ids but the module header's {what} is "
                      f"{want} ({mode} mode)", comp, instr)
            return False
        if op not in ("all-reduce", "all-reduce-start") and len({len(g) for g in groups}) > 1:
            self.fail(f"{op}: replica groups must all have one size, got sizes "
                      f"{sorted({len(g) for g in groups})}", comp, instr)
            return False
        return groups

    def subgroup_size(self, comp: Computation, instr: Instruction):
        """Participants per replica group (XLA's ``GetSubgroupSize`` for the group mode
        that ``channel_id`` and ``use_global_device_ids`` select); None when the groups
        are not known explicitly; False after a failure."""
        m = self.module
        groups = self.replica_groups(comp, instr)
        if groups is None or groups is False:
            return groups
        mode = self.group_mode(comp, instr)
        if mode == "flattened":
            return len(groups[0])
        if mode == "partition":
            return len(groups[0]) if groups else m.num_partitions
        size = len(groups[0]) if groups else m.replica_count
        return size * m.num_partitions if mode == "replica-and-partition" else size

    def check_all_to_all(self, comp: Computation, instr: Instruction) -> bool:
        """XLA's ``HandleAllToAll``: the split count is the participants of a replica
        group (``GetSubgroupSize``); the array form's split dimension divides by it, the
        tuple form has one operand per participant."""
        split = self.subgroup_size(comp, instr)
        if split is False:
            return False
        if split is None:
            return True
        dims = instr.attrs.get("dimensions")
        if dims is None:
            if len(instr.operands) != split:
                self.fail(f"all-to-all: the tuple form takes one operand per participant: "
                          f"{len(instr.operands)} operands, replica groups of {split}",
                          comp, instr)
                return False
            return True
        x = instr.operands[0].shape if instr.operands else None
        if isinstance(dims, (list, tuple)) and len(dims) == 1 and isinstance(x, ArrayShape) \
                and 0 <= int(dims[0]) < x.rank and x.dims[int(dims[0])] % split:
            self.fail(f"all-to-all: split dimension {dims[0]} of {shape_str(x)} is not divisible "
                      f"by the split count {split} (the participants of a replica group)",
                      comp, instr)
            return False
        return True

    def check_source_target_pairs(self, comp: Computation, instr: Instruction) -> bool:
        """XLA's ``CheckDuplicatedSourceOrTarget`` (collective-permute without
        ``slice_sizes``): sources and targets in range (the replica or partition count,
        or the largest id + 1 when that is 1) and each at most once."""
        pairs = instr.attrs.get("source_target_pairs")
        if not isinstance(pairs, (list, tuple)) or instr.attrs.get("slice_sizes") is not None:
            return True
        try:
            pairs = [(int(a), int(b)) for a, b in pairs]
        except (TypeError, ValueError):
            return True
        mode = self.group_mode(comp, instr)
        limit = self.module.replica_count if mode == "replica" else self.module.num_partitions
        if limit == 1:
            limit = max([1] + [max(a, b) + 1 for a, b in pairs])
        seen: tuple[set[int], set[int]] = (set(), set())
        for pair in pairs:
            for k, role in ((0, "source"), (1, "target")):
                v = pair[k]
                if not 0 <= v < limit:
                    self.fail(f"{instr.opcode}: {role} {v} of source_target_pairs is out of range "
                              f"[0, {limit})", comp, instr)
                    return False
                if v in seen[k]:
                    self.fail(f"{instr.opcode}: {role} {v} appears more than once in "
                              "source_target_pairs", comp, instr)
                    return False
                seen[k].add(v)
        return True

    def resolve_called(self, comp: Computation, instr: Instruction) -> dict[str, Any] | None:
        called: dict[str, Any] = {}
        for attr, value in instr.attrs.items():
            refs = None
            if isinstance(value, ComputationRef):
                refs = [value]
            elif isinstance(value, (list, tuple)) and value and \
                    all(isinstance(v, ComputationRef) for v in value):
                refs = list(value)
            if refs is None:
                continue
            progs = []
            for ref in refs:
                callee = self.module.computations.get(str(ref))
                if callee is None:
                    self.fail(f"{attr}=%{ref}: no computation named {ref}", comp, instr)
                    return None
                if callee is comp:
                    self.fail(f"{attr}=%{ref}: a computation cannot call itself", comp, instr)
                    return None
                want = _expected_params(instr, attr)
                got = len([p for p in callee.instructions if p.opcode == "parameter"])
                if want is not None and got != want:
                    self.fail(f"{attr}=%{ref} takes {got} parameter(s), expected {want}",
                              comp, instr)
                    return None
                if callee.root is None:
                    self.fail(f"{attr}=%{ref} has no root instruction", comp, instr)
                    return None
                progs.append(_program_shape(callee))
            called[attr] = progs if isinstance(value, (list, tuple)) else progs[0]
        return called


def verify_computation(module: Module, comp: Computation, *, collect: bool = False):
    """Verify one computation of ``module`` (called computations are looked up there)."""
    v = _Verifier(module, collect)
    v.check_computation(comp)
    return v.errors if collect else None


def verify_module(module: Module, collect: bool = False):
    """Raise ``HloVerifyError`` on the first problem, or with ``collect=True`` return
    the list of all problems (empty when the module is valid)."""
    errors = _Verifier(module, collect).run()
    return errors if collect else None
