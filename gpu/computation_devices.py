"""Computations called per element that hold collectives, on a module of several devices.

On the CPU backend (``evaluator/collectives.py``) a ``map`` body or a ``reduce``
reducer holding a collective is called once per element (map: row-major; reduce: output
by output, folding the reduced elements in order), and each call's collective is a
rendezvous: the ``k``-th execution of an instruction on device ``d`` meets the ``k``-th on
device ``e`` (executions matched by instruction name, or by channel with ``channel_id``,
and per-device count). When every device runs each collective once per call, call ``k`` of
device ``d`` meets call ``k`` of device ``e``: element ``k`` (fold step ``k``) of every
device combines with the same element of the others.

Here that is one device kernel per op (**replica-unrolled**): the op rendezvouses once
through the hub with the devices its computation's collectives connect it to (the
closure of their groups: its *component*, in device order), each handing its operand
device arrays; :func:`unrolled` rewrites the computation into one that takes every
component device's arguments and returns every device's results, in which each
instruction appears once per device (``replica-id``/``partition-id`` that device's
constants, and the computations it calls that read them cloned per device) and each
collective becomes the CPU's combination of its group's per-device values, in group
order: all-reduce a chain of ``to_apply`` calls (``_combine``'s rounding: each step
rounded to the type), all-gather a concatenate, reduce-scatter and all-to-all slices of
the group's values (combined, or concatenated), collective-permute the source's value
or zeros, collective-broadcast the group root's value; the dedicated asynchronous pairs
(all-reduce, all-gather, collective-permute start/done) give their ``-start`` tuples
and ``-done`` elements. The rewritten computation compiles with
``gpu/computation.py``'s compiler (no collective and no device id is left in it), the
op launches it over all participants' operands (the other devices' buffers are on the
same GPU), and keeps its own device's result. Every device computes the whole
component's values, so no data moves between devices but the rendezvous' handles.

Scope (:class:`Unsupported`; the op then calls the computation one call at a time
through each device's GPU interpreter, ``gpu/calls.py``, whose collectives meet the
other devices' as the CPU's do): collectives only where every
call of the computation runs each of them exactly once, uniformly on every device: in
the computation and in the ``call``/``fusion`` bodies it inlines. A collective under a
conditional branch, a ``while``, or any other op calling a computation (nested map,
reduce, sort, scatter, async-start wrappers) runs a data-dependent number of times per
call, and the CPU then pairs calls of different elements (device 0's element 0 with
device 1's element 1 when only those take the branch): the per-call path gives that
outcome (its values, or its rendezvous timeout error when the counts differ). So do
computations
with ``rng``/``rng-get-and-update-state`` (their draws are per device and per call) and
collectives of several operands of several elements each (only one-element values and
the small arrays ``gpu/computation.py`` holds, up to four elements, are values here). The
CPU's errors for a group naming a device outside the module, or an all-gather whose
group does not fit the declared result, are raised by the op when it calls the
computation at least once (the CPU raises them at the first call).

Divergence the CPU resolves by matching counts across ops (device 0's map meeting
device 1's ``call`` of the same computation; maps of different sizes) is not
reproduced: the ops rendezvous under the computation's name, and operands of different
shapes raise an ``HloEvalError`` at once (the CPU times out, or pairs the calls).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from numba import cuda

from hloref.attrs import ComputationRef
from hloref.errors import HloEvalError
from hloref.evaluator.collectives import (Device, DeviceIO, NotInGroup, check_gathered,
                                          check_scattered, device_of, exchange,
                                          instruction_participants, permute_source)
from hloref.evaluator.interpreter import live_instructions, topological_order
from hloref.ir import Computation, Instruction, Module
from hloref.op_properties import opcodes_with
from hloref.shapes import ArrayShape, TupleShape

from .device import empty
from .elementwise import launch
from .registry import GpuFallback
from .shape_ops import int_tuple, row_major_strides, strided_offset

__all__ = ["COLLECTIVES", "Unsupported", "Unrolled", "applies", "unrolled", "rendezvous",
           "map_on_devices", "reduce_on_devices"]

#: the collectives a computation may hold here (dedicated async pairs included)
COLLECTIVES = opcodes_with("gpu-device-collectives")

#: every op that is a rendezvous of devices (a computation holding one qualifies for the
#: several-device path, and, where it is not in ``COLLECTIVES``, is refused there)
_RENDEZVOUS = opcodes_with("rendezvous")

_IDS = ("replica-id", "partition-id")

#: a computation holding these is not unrolled: per-device, per-call draws
_DRAWS = ("rng", "rng-get-and-update-state")

#: collectives with a ``use_global_device_ids`` field (``instruction_participants``)
_GLOBAL_IDS_FIELD = opcodes_with("global-device-ids-mode")


class Unsupported(Exception):
    """The computation has no unrolled form here (the op runs on the CPU)."""


def _holds(comp, module, opcodes, memo) -> bool:
    """Whether ``comp`` or a computation it calls holds one of ``opcodes`` (an async
    wrapper counts as its wrapped op)."""
    if comp.name not in memo:
        memo[comp.name] = False  # recursion guard
        memo[comp.name] = any(
            i.opcode in opcodes or i.async_wrapped_opcode in opcodes or any(
                _holds(module.computations[n], module, opcodes, memo)
                for n in i.called_computation_names() if n in module.computations)
            for i in comp.instructions)
    return memo[comp.name]


def applies(ctx, comp) -> bool:
    """Whether an op of ``ctx``'s evaluation calling ``comp`` per element takes this
    path: the module runs on several devices and ``comp`` holds a rendezvous."""
    dev = device_of(ctx)
    if dev.replica_count * dev.num_partitions == 1:
        return False
    return _holds(comp, ctx.module, _RENDEZVOUS, {})


def _live(module, comp):
    """The instructions one call of ``comp`` evaluates on the CPU, operands first."""
    live = live_instructions(module, comp)
    return [i for i in topological_order(comp) if id(i) in live]


def _group(instr, dev: Device) -> list[int]:
    """The participants of collective ``instr`` run by ``dev``, as the CPU has them."""
    a = instr.attrs
    op = instr.opcode
    if op.startswith("collective-permute"):  # every device reaches its rendezvous
        return list(range(dev.replica_count * dev.num_partitions))
    try:
        return instruction_participants(dev, a.get("replica_groups"), a.get("channel_id"),
                                        a.get("use_global_device_ids"),
                                        has_global_ids_field=op in _GLOBAL_IDS_FIELD)
    except NotInGroup:  # collective-broadcast's zeros: the per-call path gives them
        raise Unsupported(f"device {dev.id} in no replica group of {instr.name}") from None


def _collectives(comp, module, memo=None):
    """The collective instructions one call of ``comp`` runs, in order (inlined
    ``call``/``fusion`` bodies included); :class:`Unsupported` for a rendezvous any
    other way (under a conditional, a loop, another op calling a computation)."""
    memo = {} if memo is None else memo
    out = []
    for instr in _live(module, comp):
        callees = [module.computations[n] for n in instr.called_computation_names()
                   if n in module.computations]
        if instr.opcode in COLLECTIVES and instr.async_wrapped_opcode is None:
            out.append(instr)
            # a reducer holding a rendezvous of its own is not unrolled
            if any(_holds(c, module, _RENDEZVOUS, memo) for c in callees):
                raise Unsupported(f"a rendezvous in the computation of {instr.name}")
        elif instr.opcode in _RENDEZVOUS or instr.async_wrapped_opcode in _RENDEZVOUS:
            raise Unsupported(f"{instr.opcode} in a computation called per element")
        elif instr.opcode in ("call", "fusion") and any(
                _holds(c, module, _RENDEZVOUS, memo) for c in callees):
            out += _collectives(callees[0], module, memo)
        elif any(_holds(c, module, _RENDEZVOUS, memo) for c in callees):
            raise Unsupported(f"a collective under {instr.opcode} (a data-dependent number "
                              f"of rendezvous per call)")
    return out


def component(comp, module, dev: Device) -> list[Device]:
    """The devices ``dev``'s calls of ``comp`` meet through its collectives, directly or
    through others (the closure of their groups), in device order."""
    collectives = _collectives(comp, module)
    R, P = dev.replica_count, dev.num_partitions
    devices = {dev.id: dev}
    todo = [dev]
    while todo:
        d = todo.pop()
        for instr in collectives:
            for g in _group(instr, d):
                if g not in devices:
                    devices[g] = Device(g // P, g % P, R, P, None, DeviceIO())
                    todo.append(devices[g])
    return [devices[g] for g in sorted(devices)]


@dataclasses.dataclass
class Unrolled:
    """A computation rewritten for a component of devices (:func:`unrolled`)."""

    computation: Computation
    module: Module  # the module with the rewritten computation and its device clones
    devices: list  # global device ids of the component, in order
    me: int  # this device's position in ``devices``
    results: int  # result leaves of one device's call


class _Unroller:
    """Builds the unrolled computation's instructions (see the module docstring)."""

    def __init__(self, module, devices: list[Device]):
        self.module = module
        self.devices = devices
        self.position = {d.id: j for j, d in enumerate(devices)}
        self.instructions: list[Instruction] = []
        self.clones: dict = {}  # (computation name, device position) -> clone
        self.count = 0

    def new(self, opcode, shape, operands=(), **fields) -> Instruction:
        self.count += 1
        instr = Instruction(f"u{self.count}", opcode, shape, list(operands), **fields)
        self.instructions.append(instr)
        return instr

    def constant(self, value, shape) -> Instruction:
        dims = shape.dims
        return self.new("constant", shape,
                        literal=np.full(dims, value, dtype=shape.element_type.dtype))

    # ------------------------------------------------------------- per-device clones

    def callee(self, name: str, j: int) -> str:
        """``name``, or its clone for device ``j`` when it reads a device id."""
        comp = self.module.computations[name]
        if not _holds(comp, self.module, _IDS, {}):
            return name
        key = (name, j)
        if key not in self.clones:
            clone = Computation(f"{name}.unrolled{self.devices[j].id}")
            self.clones[key] = clone
            made: dict[int, Instruction] = {}
            for instr in topological_order(comp):
                made[id(instr)] = new = self.clone(instr, [made[id(o)] for o in instr.operands], j)
                clone.instructions.append(new)
            clone.root = made[id(comp.root)]
        return self.clones[key].name

    def clone(self, instr, operands, j) -> Instruction:
        """``instr`` for device ``j``: its device ids constants, the computations it calls
        that read them cloned for ``j``."""
        dev = self.devices[j]
        if instr.opcode in _IDS:
            value = dev.replica if instr.opcode == "replica-id" else dev.partition
            return Instruction(f"{instr.name}.d{dev.id}", "constant", instr.shape,
                               literal=np.asarray(value, instr.shape.element_type.dtype))
        attrs = {}
        for k, v in instr.attrs.items():
            if isinstance(v, ComputationRef):
                v = ComputationRef(self.callee(str(v), j))
            elif isinstance(v, (list, tuple)) and any(isinstance(c, ComputationRef) for c in v):
                v = type(v)(ComputationRef(self.callee(str(c), j)) for c in v)
            attrs[k] = v
        return dataclasses.replace(instr, name=f"{instr.name}.d{dev.id}", operands=list(operands),
                                   attrs=attrs, control_predecessors=[])

    # ------------------------------------------------------------- the joint body

    def unroll(self, comp, args: list[list[Instruction]]) -> list[Instruction]:
        """``comp``'s instructions for every device at once, each device's parameters
        ``args[j]``; returns each device's root."""
        n = len(self.devices)
        values: list[dict] = [dict() for _ in range(n)]
        for instr in _live(self.module, comp):
            key = id(instr)
            if instr.opcode == "parameter":
                for j in range(n):
                    values[j][key] = args[j][instr.parameter_number]
                continue
            ops = [[values[j][id(o)] for o in instr.operands] for j in range(n)]
            callees = instr.called_computation_names()
            if instr.opcode in COLLECTIVES:
                for j in range(n):
                    values[j][key] = self.collective(instr, j, ops)
            elif instr.opcode in ("call", "fusion") and _holds(
                    self.module.computations[callees[0]], self.module, _RENDEZVOUS, {}):
                roots = self.unroll(self.module.computations[callees[0]], ops)
                for j in range(n):
                    values[j][key] = roots[j]
            else:
                for j in range(n):
                    values[j][key] = self.clone(instr, ops[j], j)
                    self.instructions.append(values[j][key])
        return [values[j][id(comp.root)] for j in range(n)]

    def element(self, value: Instruction, k: int) -> Instruction:
        shape = value.shape.elements[k]
        return self.new("get-tuple-element", shape, [value], attrs={"index": k})

    def reduce_chain(self, to_apply: str, j: int, values: list[list[Instruction]], shapes):
        """The CPU's ``_combine``: ``values[0]``, then ``to_apply(acc, v)`` for each next
        participant's ``v``, in group order (each a list of the operands' values)."""
        comp = self.module.computations[to_apply]
        callee = ComputationRef(self.callee(to_apply, j))
        n = len(shapes)
        root = comp.root.shape
        leaves = root.elements if isinstance(root, TupleShape) else (root,)
        pairwise = n > 1 and len(comp.parameters) == 2  # a combined all-reduce
        if any(not isinstance(s, ArrayShape) for s in leaves) or \
                [s.element_type for s in leaves] != \
                [s.element_type for s in (shapes[:1] if pairwise else shapes)]:
            raise Unsupported("a reducer changing the element type")
        acc = list(values[0])
        for v in values[1:]:
            if n == 1 or pairwise:
                acc = [self.new("call", s, [a, x], attrs={"to_apply": callee})
                       for a, x, s in zip(acc, v, shapes)]
            else:
                both = self.new("call", TupleShape(tuple(shapes)), acc + list(v),
                                attrs={"to_apply": callee})
                acc = [self.element(both, k) for k in range(n)]
        return acc

    def packed(self, values: list[Instruction], shape) -> Instruction:
        return values[0] if not isinstance(shape, TupleShape) else \
            self.new("tuple", shape, values)

    def sliced(self, value: Instruction, dim: int, start: int, size: int) -> Instruction:
        from hloref.attrs import SliceDim
        dims = list(value.shape.dims)
        spec = [SliceDim(0, d, 1) for d in dims]
        spec[dim] = SliceDim(start, start + size, 1)
        dims[dim] = size
        return self.new("slice", ArrayShape(value.shape.element_type, tuple(dims)), [value],
                        attrs={"slice": spec})

    def collective(self, instr, j: int, ops: list[list[Instruction]]) -> Instruction:
        """Collective ``instr``'s value on device ``j`` from the group's values ``ops``
        (by position), the CPU's op (``evaluator/collectives.py``) step by step."""
        op, a, dev = instr.opcode, instr.attrs, self.devices[j]
        shape = instr.shape
        if op in ("all-reduce-done",):
            return ops[j][0]
        if op in ("all-gather-done", "collective-permute-done"):
            return self.element(ops[j][0], 1)
        group = _group(instr, dev)
        at = [self.position[g] for g in group]
        mine = ops[j]
        if op in ("all-reduce", "all-reduce-start"):
            values = self.reduce_chain(str(a.get("to_apply")), j, [ops[e] for e in at],
                                       [o.shape for o in mine])
            return self.packed(values, shape)
        if op in ("all-gather", "all-gather-start"):
            (dim,) = tuple(a.get("dimensions"))
            declared = shape.elements[1] if op.endswith("-start") else shape
            leaves = declared.elements if isinstance(declared, TupleShape) else (declared,)
            dims = []
            for i, x in enumerate(mine):
                d = list(x.shape.dims)
                d[dim] = sum(ops[e][i].shape.dims[dim] for e in at)
                dims.append(d)
            check_gathered(instr.name, group, dims, shape, op)
            outs = [self.new("concatenate", leaf, [ops[e][i] for e in at],
                             attrs={"dimensions": [dim]})
                    for i, leaf in enumerate(leaves)]
            result = self.packed(outs, declared)
            if op == "all-gather-start":
                operand = self.packed(mine, shape.elements[0])
                return self.new("tuple", shape, [operand, result])
            return result
        me = group.index(dev.id)
        if op == "reduce-scatter":
            (dim,) = tuple(a.get("dimensions"))
            leaves = shape.elements if isinstance(shape, TupleShape) else (shape,)
            pieces = []
            for i, (x, leaf) in enumerate(zip(mine, leaves)):
                chunk = check_scattered(instr.name, group, x.shape.dims[dim], leaf.dims[dim], dim)
                pieces.append([self.sliced(ops[e][i], dim, me * chunk, chunk) for e in at])
            values = self.reduce_chain(str(a.get("to_apply")), j,
                                       [[p[k] for p in pieces] for k in range(len(at))],
                                       list(leaves))
            return self.packed(values, shape)
        if op == "all-to-all":
            if a.get("dimensions"):
                (dim,) = tuple(a.get("dimensions"))
                (x,) = mine
                chunk = x.shape.dims[dim] // len(group)
                parts = [self.sliced(ops[e][0], dim, me * chunk, chunk) for e in at]
                return self.new("concatenate", shape, parts, attrs={"dimensions": [dim]})
            return self.packed([ops[e][me] for e in at], shape)  # operand j to participant j
        if op in ("collective-permute", "collective-permute-start"):
            if len(mine) != 1 or a.get("slice_sizes") is not None:
                raise Unsupported("collective-permute of several operands")
            pairs = [tuple(int(v) for v in p) for p in a.get("source_target_pairs")]
            source = permute_source(dev, pairs, a.get("channel_id"))
            x = mine[0]
            value = ops[self.position[source]][0] if source is not None else \
                self.constant(0, x.shape)
            if op == "collective-permute":
                return value
            contexts = [self.constant(0, s) for s in shape.elements[2:]]
            return self.new("tuple", shape, [x, value] + contexts)
        if op == "collective-broadcast":
            return self.packed(list(ops[at[0]]), shape)
        raise Unsupported(op)


_UNROLLED: dict = {}


def unrolled(comp, module, dev: Device, split: int | None = None) -> Unrolled:
    """``comp`` rewritten for ``dev``'s component (see the module docstring): parameter
    ``k`` of component device ``e`` (of ``m`` per device) is parameter ``e * m + k``, or with
    ``split`` (a reducer's ``n`` accumulators) the accumulators of every device first,
    ``e * n + k``, then the elements, ``N * n + e * (m - n) + k - n``; the result is the
    tuple of every device's result leaves, device by device. :class:`Unsupported` when
    it has none; the CPU's ``HloEvalError`` for collectives that contradict the module."""
    key = (id(comp), dev.id, dev.replica_count, dev.num_partitions, split)
    hit = _UNROLLED.get(key)
    if hit is not None and hit[0] is comp:
        return hit[1]
    if _holds(comp, module, _DRAWS, {}):
        raise Unsupported("draws in a computation with collectives")
    devices = component(comp, module, dev)
    unroller = _Unroller(module, devices)
    params = sorted(comp.parameters, key=lambda p: p.parameter_number)
    m, count = len(params), len(devices)
    args = []
    for e, d in enumerate(devices):
        mine = []
        for k, p in enumerate(params):
            if split is None:
                number = e * m + k
            else:
                number = e * split + k if k < split else count * split + e * (m - split) + k - split
            mine.append(unroller.new("parameter", p.shape, parameter_number=number))
        args.append(mine)
    roots = unroller.unroll(comp, args)
    leaves = []
    for root in roots:
        if isinstance(root.shape, TupleShape):
            leaves += [unroller.element(root, k) for k in range(len(root.shape.elements))]
        else:
            leaves.append(root)
    root = unroller.new("tuple", TupleShape(tuple(x.shape for x in leaves)), leaves)
    joint = Computation(f"{comp.name}.unrolled", unroller.instructions, root)
    computations = dict(module.computations)
    computations.update({c.name: c for c in unroller.clones.values()})
    computations[joint.name] = joint
    view = Module(module.name, computations, module.entry_name, dict(module.attrs))
    result = Unrolled(joint, view, [d.id for d in devices],
                      [d.id for d in devices].index(dev.id), len(leaves) // count)
    _UNROLLED[key] = (comp, result)
    return result


def rendezvous(ctx, comp, joint: Unrolled, operands: list) -> list[list]:
    """Every component device's ``operands`` (device arrays), in component order: one
    rendezvous for the op (under the computation's name), the shapes checked alike."""
    values = exchange(ctx, f"{comp.name} (called per element)", joint.devices, list(operands))
    mine = [(o.et, tuple(o.shape)) for o in operands]
    for d in joint.devices:
        theirs = [(o.et, tuple(o.shape)) for o in values[d]]
        if theirs != mine:
            raise HloEvalError(f"devices call computation {comp.name}, whose collectives pair "
                               f"their calls, on operands {theirs} and {mine}")
    return [values[d] for d in joint.devices]


def compiled_for(joint: Unrolled):
    """The unrolled computation as a device function (``gpu/computation.py``);
    ``GpuFallback`` when it has ops without one."""
    from .computation import compile_computation
    compiled = compile_computation(joint.computation, joint.module)
    if compiled is None:
        raise GpuFallback("collectives on several devices: the computation has ops without "
                          "a device form")
    return compiled


_KERNELS: dict = {}


def _kernel(compiled, source: str, key):
    hit = _KERNELS.get(key)
    if hit is None:
        ns = {"cuda": cuda, "np": np, "f": compiled.fn, "strided_offset": strided_offset}
        exec(compile(source, "<gpu computation on several devices>", "exec"), ns)
        hit = _KERNELS[key] = (compiled, cuda.jit(ns["k"]))
    return hit[1]


def map_source(arity: int, me: int) -> str:
    """One thread per element: ``f`` of every component device's element ``i``
    (``arity`` operand arrays, device by device), device ``me``'s result kept."""
    xs = [f"x{j}" for j in range(arity)]
    return "\n".join([
        f"def k(out, count{''.join(', ' + x for x in xs)}):",
        "    i = cuda.grid(1)",
        "    step = cuda.gridsize(1)",
        "    while i < count:",
        f"        out[i] = f({', '.join(x + '[i]' for x in xs)})[{me}]",
        "        i += step"]) + "\n"


def fold_source(n: int, devices: int, me: int) -> str:
    """One thread per output: the CPU's ``sequential_reduce`` of every component device
    at once (``n`` inputs and inits per device, device by device), each fold step one call
    of the unrolled reducer (every device's accumulators, then every device's elements:
    ``unrolled(..., split=n)``), device ``me``'s accumulators written out."""
    count = n * devices
    xs, ins, acc = ([f"{p}{t}" for t in range(count)] for p in ("x", "i", "a"))
    outs = [f"o{j}" for j in range(n)]
    body = [f"def k({', '.join(xs + ins + outs)}, count, kept_dims, kept_strides, red_dims, "
            "red_strides, total):",
            "    o = cuda.grid(1)",
            "    step = cuda.gridsize(1)",
            "    while o < count:",
            "        base = strided_offset(o, kept_dims, kept_strides, 0)"]
    body += [f"        {a} = {i}[0]" for a, i in zip(acc, ins)]
    body += ["        for r in range(total):",
             "            off = strided_offset(r, red_dims, red_strides, base)",
             f"            c = f({', '.join(acc)}, {', '.join(x + '[off]' for x in xs)})"]
    body += [f"            {a} = c[{t}]" for t, a in enumerate(acc)]
    body += [f"        {o}[o] = {acc[me * n + j]}" for j, o in enumerate(outs)]
    body += ["        o += step"]
    return "\n".join(body) + "\n"


def _joint(ctx, comp, split=None) -> Unrolled:
    try:
        return unrolled(comp, ctx.module, device_of(ctx), split)
    except Unsupported as exc:
        raise GpuFallback(f"collectives on several devices: {exc}") from None


def map_on_devices(operands, shape, comp, ctx):
    """``map`` of a computation holding collectives on several devices (the module
    docstring): the operands of the whole component, one kernel."""
    dims = tuple(shape.dims)
    out = empty(dims, shape.element_type)
    if out.size == 0:  # the CPU calls it never: no rendezvous
        return out
    joint = _joint(ctx, comp)
    compiled = compiled_for(joint)
    if compiled.results[joint.me] != shape.element_type or \
            compiled.params[:len(operands)] != [o.et for o in operands]:
        raise GpuFallback("map computation types differ from the operands' or the result's")
    everyone = rendezvous(ctx, comp, joint, operands)
    arrays = [o.data for mine in everyone for o in mine]
    kernel = _kernel(compiled, map_source(len(arrays), joint.me), ("map", id(compiled), joint.me))
    launch(kernel, out.size, out.data, out.size, *arrays)
    return out


def reduce_on_devices(xs, inits, shape, dims, comp, ctx):
    """``reduce`` whose reducer holds collectives on several devices (the module
    docstring): the CPU's sequential fold of the whole component, one kernel."""
    leaves = list(shape.elements) if isinstance(shape, TupleShape) else [shape]
    outs = [empty(s.dims, s.element_type) for s in leaves]
    x0 = xs[0]
    kept = [d for d in range(x0.ndim) if d not in dims]
    total = 1
    for d in dims:
        total *= x0.shape[d]
    if outs[0].size == 0:
        return outs
    if total == 0:  # the CPU calls it never: the inits
        from .shape_ops import broadcast
        return [broadcast(i, shape=s) for i, s in zip(inits, leaves)]
    n = len(xs)
    joint = _joint(ctx, comp, split=n)
    compiled = compiled_for(joint)
    ets = [s.element_type for s in leaves]
    if compiled.results[joint.me * n:(joint.me + 1) * n] != ets or \
            [i.et for i in inits] != ets or [x.et for x in xs] != ets:
        raise GpuFallback("reduce whose input, init and result types differ")
    everyone = rendezvous(ctx, comp, joint, list(xs) + list(inits))
    arrays = [o.data for mine in everyone for o in mine[:n]]
    starts = [o.data for mine in everyone for o in mine[n:]]
    st = row_major_strides(x0.shape)
    kernel = _kernel(compiled, fold_source(n, len(everyone), joint.me),
                     ("reduce", id(compiled), n, joint.me))
    launch(kernel, outs[0].size, *arrays, *starts, *[o.data for o in outs], outs[0].size,
           int_tuple(x0.shape[d] for d in kept), int_tuple(st[d] for d in kept) if kept else (0,),
           int_tuple(x0.shape[d] for d in dims), int_tuple(st[d] for d in dims) if dims else (0,),
           total)
    return outs
