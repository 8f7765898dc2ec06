"""The emitter of a compiled computation (``gpu/computation.py``): the lines of the device
function, one per instruction, and the registry of op forms it dispatches through.

An op form is a method of one of the form modules (``gpu/computation_control.py``,
``computation_arrays.py``, ``computation_sizes.py``, ``computation_elementwise.py``,
``computation_one_element.py``, ``computation_formulas.py``, ``computation_rng.py``),
registered with :func:`form` for its opcodes and the *stage* of :meth:`EmitterBase.instruction`
at which it applies. The stages are the kinds of values an instruction may hold, checked
in this order, the first that applies taking the instruction:

1. ``VALUES``: forms that pass values of any kind along (tuple, get-tuple-element, copy...);
2. ``SIZES``: forms that make runtime dimension sizes; an instruction given a value with
   runtime sizes goes to ``sized_op`` (``computation_sizes.py``) whatever its opcode;
3. small arrays (``VecType``): an elementwise op (the catalogue's ``elementwise`` group)
   goes element by element (``vec_elementwise``); forms of stage ``SMALL_ARRAYS`` take
   them; any other op given one has no device form, except the ``WHOLE`` forms
   registered with ``small_arrays=True``;
4. ``WHOLE``: forms that take whole values, tuples and small arrays included (calls,
   loops, conditionals, the rng state);
5. a token given to any other op has no device form;
6. ``ONE_ELEMENT``: forms that check their own one-element operands (ops that call a
   computation or move elements, collectives on one device, the asynchronous pairs,
   the scalar formulas);
7. ``ELEMENT``: forms of one-element arrays (their operands no tuples), given the
   result's element type;
8. an op with complex operands or result: ``complex_instruction``
   (``computation_elementwise.py``), whose forms are stage ``COMPLEX``;
9. ``SCALAR``: the elementwise forms of real types, else the elementwise function
   tables (``gpu/elementwise.py``: ``WIDTH_OPS``, ``ELEMENT_TABLES``).

The forms call each other through ``self``; the emitter class that has them all is
``gpu/computation.py:Emitter``.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from hloref.evaluator.interpreter import Limits
from hloref.opcodes import ELEMENTWISE

from .computation_values import (TOKEN, Unsupported, any_type, cpu_order, holds_sized,
                                  holds_vec, part_type, root_order, scalar_type, store_c64,
                                  store_c128, complex_nonzero, vec_shape)
from .convert import convert_fn
from .device import LOAD, STORE, f32_bits, f64_bits, type_class, type_params
from .elementwise import element_fn

__all__ = ["EmitterBase", "FORMS", "SMALL_ARRAY_OPS", "form", "LOOP_STATUS_TOP", "VALUES",
           "SIZES", "SMALL_ARRAYS", "WHOLE", "ONE_ELEMENT", "ELEMENT", "COMPLEX", "SCALAR",
           "SIZED"]

#: a loop's code ``c`` (``2k + 1`` for loop ``k`` of a computation past the limit, ``2k +
#: 2`` for it endless) is recorded as ``LOOP_STATUS_TOP - c`` by an atomic maximum: the
#: record is the earliest loop in program order that failed in any thread (a thread
#: going on past a failed loop, or another thread, cannot overwrite it), 0 for none
LOOP_STATUS_TOP = 1 << 40

VALUES, SIZES, SMALL_ARRAYS, WHOLE = "values", "sizes", "small arrays", "whole"
ONE_ELEMENT, ELEMENT, COMPLEX, SCALAR = "one element", "element", "complex", "scalar"
#: forms of an op given values with runtime sizes (``computation_sizes.py``)
SIZED = "sized"

#: stage -> opcode -> form (a function of the emitter, the instruction, its operand values
#: and their types; stages ``ELEMENT``, ``COMPLEX``, ``SCALAR`` also get the element type,
#: ``SMALL_ARRAYS`` the result's ``VecType`` or None, ``SIZED`` the operands taken apart)
FORMS: dict[str, dict] = {stage: {} for stage in (VALUES, SIZES, SMALL_ARRAYS, WHOLE,
                                                  ONE_ELEMENT, ELEMENT, COMPLEX, SCALAR,
                                                  SIZED)}
#: the opcodes that may be given a small array value (besides the elementwise ops)
SMALL_ARRAY_OPS: set = set()


def form(*opcodes: str, stage: str, small_arrays: bool = False):
    """Register the decorated emitter method as the device form of ``opcodes`` at
    ``stage``; ``small_arrays``: it may be given small array values (stage ``WHOLE``)."""

    def register(fn):
        for opcode in opcodes:
            if opcode in FORMS[stage]:
                raise RuntimeError(f"device form of {opcode} registered twice at {stage}")
            FORMS[stage][opcode] = fn
            if stage in (VALUES, SMALL_ARRAYS) or small_arrays:
                SMALL_ARRAY_OPS.add(opcode)
        return fn

    return register


class EmitterBase:
    """Generates the device function's lines: each value is a local name (a storage
    value), or a list of them for a tuple; nested ``call``/``fusion`` are inlined."""

    def __init__(self, module, limit: int = Limits().max_while_iterations, name: str = "",
                 device=(0, 0, 1), serial: bool = False):
        self.module = module
        self.device = device
        self.name = name
        self.rng_sites = 0
        #: ``gpu/computation.py:_state_sites`` of a computation compiled with a call
        #: index, else None
        self.state_sites = None
        self.state_delta = 0
        #: the serial mode (``gpu/serial.py``): instructions in the CPU's order, and each
        #: rng-get-and-update-state reads and counts in the state channel (``state_io``)
        self.serial = bool(serial)
        self.state_count = 0  # rng-get-and-update-state sites emitted in the serial mode
        self.call_path: tuple = ()  # ids of the call/fusion instructions being inlined
        self.ns: dict = {}
        self.lines: list[str] = []
        self.count = 0
        self.indent = "    "
        self.limit = int(limit)
        #: (while instruction name, (limit, condition name, body name)), or (instruction
        #: name, error) for an error site
        self.loops: list = []

    def bind(self, prefix, value):
        key = f"{prefix}{len(self.ns)}"
        self.ns[key] = value
        return key

    def fresh(self):
        self.count += 1
        return f"t{self.count}"

    def load(self, name, et, cls=None):
        """The compute-value expression of storage value ``name`` of type ``et``."""
        cls = cls or type_class(et)
        return f"{self.bind('L', LOAD[cls])}({name}, {self.bind('P', type_params(et))})"

    def store(self, expr, et, cls=None):
        cls = cls or type_class(et)
        return f"{self.bind('S', STORE[cls])}({expr}, {self.bind('P', type_params(et))})"

    def line(self, expr):
        name = self.fresh()
        self.lines.append(f"{self.indent}{name} = {expr}")
        return name

    def statement(self, text):
        self.lines.append(f"{self.indent}{text}")

    def parts(self, name):
        return f"{name}.real", f"{name}.imag"

    def store_complex(self, pair, et):
        """Store the ``(re, im)`` tuple expression ``pair`` as complex ``et``."""
        r = self.line(pair)
        fn = self.bind("Z", store_c64 if et.name == "c64" else store_c128)
        return self.line(f"{fn}({r}[0], {r}[1])")

    def emit(self, comp, args, arg_types):
        """Lines computing ``comp`` on values ``args``; returns (root value, root type)."""
        names: dict[int, object] = {}
        types: dict[int, object] = {}
        for p in comp.parameters:
            names[id(p)] = args[p.parameter_number]
            types[id(p)] = arg_types[p.parameter_number]
            if any_type(p.shape) != types[id(p)]:
                raise Unsupported("parameter type")
        order = cpu_order(self.module, comp) if self.serial else \
            [(i, None) for i in root_order(comp)]
        for instr, target in order:
            if instr.opcode == "parameter":
                continue
            if target is not None:  # the CPU forwards the element (its tuple may be dead)
                names[id(instr)], types[id(instr)] = names[id(target)], types[id(target)]
                continue
            ops = [names[id(o)] for o in instr.operands]
            op_types = [types[id(o)] for o in instr.operands]
            names[id(instr)], types[id(instr)] = self.instruction(instr, ops, op_types)
        if holds_sized(types[id(comp.root)]):  # sizes stay inside one computation
            raise Unsupported("a computation returning runtime sizes")
        return names[id(comp.root)], types[id(comp.root)]

    def instruction(self, instr, ops, op_types):
        """The value and type of ``instr`` given its operands' values and types: the form
        the registry holds for its opcode at the first stage that applies (see above)."""
        op = instr.opcode
        if op in FORMS[VALUES]:
            return FORMS[VALUES][op](self, instr, ops, op_types)
        if op in FORMS[SIZES] or any(holds_sized(t) for t in op_types):
            return self.sized_op(instr, ops, op_types)
        vec = vec_shape(instr.shape)
        holds = any(holds_vec(t) for t in op_types)
        if (vec is not None or holds) and op in ELEMENTWISE:
            return self.vec_elementwise(instr, ops, op_types, vec)
        if holds and op not in SMALL_ARRAY_OPS:
            raise Unsupported(f"{op} of a small array")
        if (vec is not None or holds) and op in FORMS[SMALL_ARRAYS]:
            return FORMS[SMALL_ARRAYS][op](self, instr, ops, op_types, vec)
        if op in FORMS[WHOLE]:
            return FORMS[WHOLE][op](self, instr, ops, op_types)
        if TOKEN in op_types or (op_types and any(isinstance(t, list) and TOKEN in t
                                                  for t in op_types)):
            raise Unsupported(f"{op} of a token")
        if op in FORMS[ONE_ELEMENT]:
            return FORMS[ONE_ELEMENT][op](self, instr, ops, op_types)
        et = scalar_type(instr.shape, rank0=False)
        if any(isinstance(t, list) for t in op_types):
            raise Unsupported(f"{op} of a tuple")
        if op in FORMS[ELEMENT]:
            return FORMS[ELEMENT][op](self, instr, ops, op_types, et), et
        if not op_types:  # replica-id, partition-id, rng-get-and-update-state...
            raise Unsupported(op)
        if type_class(op_types[0]) == "complex" or type_class(et) == "complex":
            return self.complex_instruction(instr, ops, op_types, et), et
        if op in FORMS[SCALAR]:
            return FORMS[SCALAR][op](self, instr, ops, op_types, et), et
        return self.elementwise(instr, ops, op_types, et), et

    def normal(self, name, et):
        """Storage value ``name`` of ``et`` through its type's load and store, so that
        every assignment to a loop or branch variable has the same numba type."""
        if type_class(et) == "complex":
            return name
        return self.store(self.load(name, et), et)

    def same_bits(self, a, b, et):
        """An expression: storage values ``a`` and ``b`` of ``et`` have the same bits."""
        cls = type_class(et)
        if cls == "complex":
            get = self.bind("F", f32_bits if et.name == "c64" else f64_bits)
            return (f"({get}({a}.real) == {get}({b}.real) and "
                    f"{get}({a}.imag) == {get}({b}.imag))")
        if cls in ("f32", "f64"):
            get = self.bind("F", f32_bits if cls == "f32" else f64_bits)
            return f"{get}({a}) == {get}({b})"
        return f"{a} == {b}"

    def choose(self, cond, a, b):
        """``a`` where ``cond`` holds, else ``b`` (tuples and small arrays element by
        element)."""
        if isinstance(a, list):
            return [self.choose(cond, x, y) for x, y in zip(a, b)]
        if isinstance(a, tuple):
            return tuple(self.choose(cond, x, y) for x, y in zip(a, b))
        return self.line(f"({a} if {cond} else {b})")

    def convert_value(self, x, src, et):
        """Storage value ``x`` of ``src`` converted to ``et`` (the convert op's rule)."""
        if src == et:
            return x
        if type_class(src) == "complex" or type_class(et) == "complex":
            return self.complex_convert(x, src, et)
        fn, cin, cout = convert_fn(src, et)
        f = self.bind("F", fn)
        return self.line(self.store(f"{f}({self.load(x, src, cin)})", et, cout))

    def bitcast_convert(self, x, src, et):
        """The bit pattern of ``x`` as ``et`` (one element: same width only)."""
        from .bitwise_convert import from_bits, to_bits
        if src.bits != et.bits or type_class(src) == "complex" or type_class(et) == "complex":
            raise Unsupported(f"bitcast-convert {src.name} -> {et.name}")
        get, put = self.bind("F", to_bits(src)), self.bind("F", from_bits(et))
        return self.line(f"{put}({get}({x}, {self.bind('P', type_params(src))}), "
                         f"{self.bind('P', type_params(et))})")

    def complex_convert(self, x, src, et):
        """The CPU's rules: complex to complex part by part, complex to real through the
        real part (pred: either part nonzero), real to complex with imaginary part 0."""
        if type_class(src) == "complex" and type_class(et) == "complex":
            return self.store_complex(f"({x}.real, {x}.imag)", et)
        if type_class(src) == "complex":
            if type_class(et) == "pred":
                fn = self.bind("F", complex_nonzero)
                return self.line(self.store(f"{fn}({x}.real, {x}.imag)", et))
            part = part_type(src)
            re = self.line(f"{x}.real")
            if part == et:
                return re
            fn, cin, cout = convert_fn(part, et)
            f = self.bind("F", fn)
            return self.line(self.store(f"{f}({self.load(re, part, cin)})", et, cout))
        part = part_type(et)
        re = x
        if src != part:
            fn, cin, cout = convert_fn(src, part)
            f = self.bind("F", fn)
            re = self.line(self.store(f"{f}({self.load(x, src, cin)})", part, cout))
        return self.store_complex(f"({re}, 0.0)", et)


    def error_site(self, name, error):
        """The status code of a run-time error of instruction ``name`` (recorded with the
        loops' codes, ``LoopRun.check`` raises ``error``): code ``2k + 1``."""
        if "LOOP_STATUS" not in self.ns:
            self.ns["LOOP_STATUS"] = cuda.to_device(np.zeros(1, np.int64))
            self.ns["cuda"] = cuda
        self.loops.append((name, error))
        return LOOP_STATUS_TOP - (2 * (len(self.loops) - 1) + 1)

    def record_if(self, cond, name, error):
        """Lines recording ``error`` when the expression ``cond`` holds."""
        self.statement(f"if {cond}:")
        self.statement(f"    cuda.atomic.max(LOOP_STATUS, 0, {self.error_site(name, error)})")

    def real_operand(self, x, t):
        """Storage value ``x`` of a real float type as an f64 expression (exact)."""
        if type_class(t) not in ("f32", "f64", "narrow"):
            raise Unsupported(f"{t.name} operand")
        return f"{self.bind('N', np.float64)}({self.load(x, t)})"

    def f64_fn(self, name):
        from hloref.types import F64
        return self.bind("F", element_fn(name, F64))
