"""Scalar HLO computations (reducers, combiners, comparators, ``map`` bodies) compiled to
numba.cuda device functions, so ops that call a computation run it on the device.

A computation qualifies when it works on scalars (parameters and results; one-element
arrays in between) and each of its ops has a device form: every op the CPU applies
elementwise (``reduce.is_vectorizable``: elementwise ops, compare, select, clamp,
convert, constants, tuples, get-tuple-element, nested ``call``/``fusion``) has a GPU
element function of its types (``elementwise.ELEMENT_TABLES``; the width-specialised
shifts, mulhi, popcnt and count-leading-zeros by ``elementwise.width_fn``;
``compare.DIRECTIONS``, ``convert.convert_fn``; complex values by
``complex_elementwise``'s part functions), and so do shape ops on one-element arrays
(reshape, broadcast, transpose, slice, reverse, bitcast, dynamic-slice,
dynamic-update-slice, concatenate: the element passes through), iota (0),
reduce-precision, same-width bitcast-convert, dot (the product, by dot's rules),
conditional (every branch computed, the selected one kept; branches with a loop
become an if/elif block, so an unselected branch's loop never runs), ``while``
(a loop in the device function over the state's scalars, see below), ``rng`` (a
counter-based draw per call, ``gpu/rng.py``; the CPU's draws come from its stream in call
order: both implementation-defined, both from the written distribution), ops on
one-element arrays that call or move (map, reduce, reduce-window, sort, gather, scatter,
pad, top-k with k = 1, get-dimension-size: ``_Emitter.one_element``), tokens (after-all,
add-dependency), domain (the operand), on a one-device module replica-id, partition-id and the
synchronous collectives (the one participant's value), the asynchronous wrappers
(async-start/update/done of a wrapped op or computation, copy-start/done, and the
dedicated all-reduce, all-gather and collective-permute pairs on one device:
``_Emitter.async_op``), and the ops whose one-element value is a scalar formula
(``_SCALAR_FORMS``, each the CPU's arithmetic: convolution, a product or, where the one
tap falls in the padding, the padding zero times rhs; cholesky, a square root;
triangular-solve, ``(1 / a) x b`` (complex: numpy's Smith division and einsum's
product in c128, as the CPU); fft of length 1; batch-norm-inference, -training and
-grad; scaled-dot (a rank-0 scale is 1, as the CPU has it); ragged-dot; stochastic-convert;
shuffle; scan of length 1, one call; select-and-scatter, one scatter call or the init,
a select holding a loop or a draw called where the CPU calls it: ``select_calls``), and
rng-bit-generator of one element of bits (the CPU's generator of one counter, bit for
bit; its ``u64[2]``/``u64[3]`` state a small array value, see below),
and rng-get-and-update-state (its ``u64[2]`` value a small array value) in every
computation an op calls per element. In a ``map`` body or a ``reduce`` reducer with
every site at a static place in the call (``call_index``, ``_state_sites``: none under a
loop, a conditional or a nested op) the CPU's calls come in a fixed order, map element
by element row-major, reduce output by output folding the reduced elements in order,
so call ``k`` at a site reads the state before the op plus ``k`` times one call's deltas
plus the deltas of the call's earlier sites (the CPU's order, nested calls and dead
sites included); the op passes ``k`` and the state to the device function and advances
the evaluation's state once by all its calls' deltas, the calls running in parallel.
Anywhere else (sites under a while loop, in a conditional's branches, in nested
one-element ops; the computations of reduce-window, sort, scatter, select-and-scatter,
and of map and reduce beyond the static case) the *serial mode* (``gpu/serial.py``):
the instructions are emitted in the CPU interpreter's order (its live instructions,
dead side effects included, in ``topological_order``: ``_cpu_order``), a conditional
whose branches hold sites runs only the selected one, and each site reads the state
before the op plus the deltas consumed so far from the state channel's device buffer
and adds its own (``gpu/rng.py``: ``take_state``, ``StateChannel``); the op makes all its
calls from one thread in the CPU's call order (``Compiled.serial``; each op's docstring
writes its order down) and then advances the evaluation's state by the sum the buffer
holds (16 bytes read back). A ``while`` that reads the state is not declared endless
when its loop state comes back unchanged (a later read may change it). On one device
a collective's reducer is never called (the CPU's group of one), so it may hold
anything.
The CPU's dots sum from +0, so a one-term float product of -0 gives +0, here too.
``Compiled.vectorizable`` says whether the CPU applies it to whole arrays (reduce and
reduce-window then follow its tree order, else its sequential fold). A computation
with other ops (a custom-call; host transfers, whose queue order is the CPU's
sequential call order; collectives on several devices other than in a ``map`` body or
a ``reduce`` reducer where each call runs each of them once (outside conditionals,
loops and nested ops: those ops rendezvous once and run the computation unrolled over
the devices, ``gpu/computation_devices.py``); runtime dimension sizes beyond the
one-element forms below; a small array value given to another op (reduce, gather,
sort, pad, map, rng...), or an array of more than ``_VEC_MAX`` elements), or one
holding an instruction its root does not read that the CPU evaluates for its effects
(``_drops_effects``), or the CPU's own errors (``subtract`` of pred, complex compare
other than EQ/NE...), is not compiled (:func:`compile_computation` returns None): its
op calls it one call at a time through the GPU interpreter instead
(``gpu/calls.py``), on the device, in the CPU's order, with the interpreter's own
effects and errors. XLA:CPU (jaxlib 0.10.2) accepts such modules in its verifier but
aborts compiling a reduce or map whose computation holds rng, a collective, infeed,
outfeed, send or a while (its loop-fusion emitter cannot index them), so no XLA
backend gives their values.

Small array values (2 to ``_VEC_MAX`` elements, ``_VecType``: a rng-bit-generator state,
or any array the computation builds) are tuples of storage values at compile time, in
row-major order. The CPU evaluates them as numpy arrays; here they pass through
everything that only moves values: ``call``/``fusion`` parameters and results
(inlined), tuples, copy, opt-barrier, ``while`` state (one loop variable per element;
the endless-loop check compares every element), ``conditional`` operands and branch
results (chosen element by element, or assigned in the if/elif block); constant and
iota give their elements; broadcast, concatenate, reshape, slice, transpose, reverse and
bitcast (in the operand's and result's layouts; another type of the same width
element by element) move them by a static index map, the CPU's numpy rule applied to
element indices (``_move_map``); dynamic-slice and dynamic-update-slice pick each
element among its few possible sources by the clamped run-time starts; elementwise ops
(select with a scalar pred, clamp with scalar bounds) run element by element through the
scalar path (``_Emitter.vec_elementwise``). A result of one element is that storage value.

Runtime dimension sizes, which the CPU's interpreter keeps in a side table beside the
values (``evaluator/dynamic.py``), exist here for one-element arrays (sizes 0 or 1:
``_SizedType``, a value ``(storage value, sizes)`` with one int or int64 local per
dimension; the storage value is the element, valid or padding, as the CPU keeps it):
``set-dimension-size`` and ``dynamic-reshape`` make them, ``get-dimension-size`` reads
them, elementwise ops carry the smallest of their same-rank operands', ``reduce`` gives
the init where a reduced dimension is empty (``_Emitter.sized_op``). The CPU's errors on
them (a size outside its bound; a dynamic-reshape that cannot hold the valid elements)
are recorded like a loop's (``error_site``) and raised after the evaluation, naming the
instruction (the CPU's message also names the offending size, which the record does
not keep). Any other op given one, a size through a call, loop or conditional, or an
array of more elements with runtime sizes runs on the CPU.

A ``while`` is bounded by the same ``Limits.max_while_iterations`` as the CPU's (the
limit of the evaluation that compiles it, :data:`LOOP_RUN`): a thread whose loop
reaches it stops the loop and records it, as does one whose loop state comes back bit
for bit unchanged while the condition holds (a pure computation then never ends; the
CPU proves that from the parts its condition reads). The record is a small device
array per compiled computation (:attr:`Compiled.loop_status`), written by the device
function; the GPU interpreter reads it once at the end of the evaluation and raises
the CPU's ``HloLimitError`` (or ``HloEvalError`` for the endless loop), naming the
``while``: the earliest in program order that failed in any thread
(:data:`LOOP_STATUS_TOP`). The CPU names the first to fail in its element order, the
same loop unless an earlier element fails only in a later loop.

Its device function takes and returns *storage* values (the array elements
themselves; a complex element is a complex scalar) and computes each instruction as the
elementwise kernels do: ``store(fn(load(a), load(b)))`` with the operand and result
types' load/store, so each step rounds or wraps to its type exactly as the CPU's
vectorised interpretation of the computation does. Complex instructions compute on the
parts (``fn(a.real, a.imag, b.real, b.imag) -> (re, im)``) and store both parts rounded
to the part type. Tuples are lists of values at compile time, and ``call``/``fusion``
bodies are inlined.

The function's Python source is generated from the instructions (one line each, in
dependency order) and compiled with ``cuda.jit(device=True)``; compiled functions are
cached per computation. :func:`compile_computation` returns None when the computation
does not qualify (the caller then calls it through the GPU interpreter, ``gpu/calls.py``).

(Over 600 lines on purpose: one concept, the compiler of a scalar computation into
device code; its emitter has a short case per op form, and the forms share its naming,
type and status-array machinery, so splitting them by op would scatter one code generator.)
"""

from __future__ import annotations

import contextvars
import zlib

import numpy as np
from numba import cuda

from hloref.errors import HloEvalError, HloLimitError
from hloref.evaluator.interpreter import Limits
from hloref.evaluator.reduce import is_vectorizable
from hloref.shapes import ArrayShape, TupleShape
from hloref.types import element_type

from . import complex_elementwise, config
from .compare import DIRECTIONS, clamp_fn
from .convert import convert_fn
from .device import LOAD, STORE, f32_bits, f64_bits, storage_dtype, type_class, type_params
from .elementwise import ELEMENT_TABLES, WIDTH_OPS, element_fn, width_fn, zero
from .registry import GpuFallback

__all__ = ["Compiled", "compile_computation", "LOOP_RUN", "LoopRun"]

class LoopRun:
    """One evaluation's loop bookkeeping: the iteration limit its ``while`` loops in
    compiled computations get, and the computations with loops it used (whose
    ``loop_status`` :meth:`check` reads once, at the end)."""

    def __init__(self, limit: int, device=None):
        self.limit = int(limit)
        #: ``(replica, partition, devices)`` of the evaluation's device (``replica-id``,
        #: ``partition-id`` and one-device collectives in computations)
        self.device = (0, 0, 1) if device is None else \
            (int(device.replica), int(device.partition),
             int(device.replica_count) * int(device.num_partitions))
        self.used: dict = {}
        #: computations with ``rng`` used so far (their draw counts restart at each evaluation)
        self.rng: dict = {}

    def check(self, raise_error: bool = True) -> None:
        """Read (and clear) the loop status of every compiled computation used; raise
        the first error recorded (``raise_error=False``: only clear)."""
        error = None
        for compiled in self.used.values():
            status = compiled.loop_status.copy_to_host()
            if int(status[0]) == 0:
                continue
            code = LOOP_STATUS_TOP - int(status[0])
            compiled.loop_status.copy_to_device(np.zeros(1, np.int64))
            if error is None:
                name, limit = compiled.loops[(code - 1) // 2]
                if isinstance(limit, Exception):  # a recorded error site (``error_site``)
                    error = limit
                elif code % 2:
                    error = HloLimitError(f"while loop still running after {limit} iterations "
                                          f"(Limits.max_while_iterations)", instruction=name)
                else:
                    error = HloEvalError("while loop does not terminate: the body returns its "
                                         "state unchanged and the condition still holds",
                                         instruction=name)
        if error is not None and raise_error:
            raise error


#: a loop's code ``c`` (``2k + 1`` for loop ``k`` of a computation past the limit, ``2k +
#: 2`` for it endless) is recorded as ``LOOP_STATUS_TOP - c`` by an atomic maximum: the
#: record is the earliest loop in program order that failed in any thread (a thread
#: going on past a failed loop, or another thread, cannot overwrite it), 0 for none
LOOP_STATUS_TOP = 1 << 40

#: the current evaluation's :class:`LoopRun` (set by the GPU interpreter's ``run``)
LOOP_RUN: contextvars.ContextVar = contextvars.ContextVar("hloref_gpu_loop_run", default=None)


class _Unsupported(Exception):
    pass


class _Token:
    """The type of a token value in a computation (``after-all``): passed along by
    tuples, dropped by ``add-dependency``; nothing computes on it."""

    name = "token"

    def __repr__(self):
        return "token"


TOKEN = _Token()

#: the most elements of a small array value (``_VecType``): rng-bit-generator's state
_VEC_MAX = 4


class _VecType:
    """The type of a small array value of 2 to ``_VEC_MAX`` elements (an rng-bit-generator
    state, ``u64[2]`` or ``u64[3]``): its value is a Python tuple of storage values in
    row-major order (an HLO tuple is a list). Only the ops in ``_VEC_OPS`` and the
    elementwise ops (``_vec_elementwise``) take one."""

    def __init__(self, et, n: int):
        self.et, self.n = et, int(n)
        self.name = f"{et.name}[{n}]"

    def __eq__(self, other):
        return isinstance(other, _VecType) and (self.et, self.n) == (other.et, other.n)

    def __hash__(self):
        return hash((self.et.name, self.n))

    def __repr__(self):
        return self.name


def _vec_shape(shape):
    """``_VecType`` of an array shape of 2 to ``_VEC_MAX`` elements, else None."""
    if not isinstance(shape, ArrayShape) or not 2 <= shape.size <= _VEC_MAX:
        return None
    if type_class(shape.element_type) not in _CLASSES or any(shape.dynamic):
        return None
    return _VecType(shape.element_type, shape.size)


def _holds_vec(t) -> bool:
    if isinstance(t, list):
        return any(_holds_vec(x) for x in t)
    return isinstance(t, _VecType)


class _SizedType:
    """The type of a one-element array with runtime dimension sizes (the CPU's side
    table, ``evaluator/dynamic.py``): its value is ``(storage value, sizes)``, one size
    per dimension (an int, or the name of an int64 local), each 0 or 1 when no error was
    recorded; the storage value is the element, valid or padding."""

    def __init__(self, et, dims):
        self.et, self.dims = et, tuple(int(d) for d in dims)
        self.name = f"{et.name}[{','.join(f'<={d}' for d in self.dims)}]"

    def __eq__(self, other):
        return isinstance(other, _SizedType) and (self.et, self.dims) == (other.et, other.dims)

    def __hash__(self):
        return hash((self.et.name, self.dims))

    def __repr__(self):
        return self.name


def _holds_sized(t) -> bool:
    if isinstance(t, list):
        return any(_holds_sized(x) for x in t)
    return isinstance(t, _SizedType)


#: families of the CPU's ops (``evaluator/registry.py``) whose result carries its
#: operands' runtime sizes dimension by dimension (``evaluator/dynamic.py``)
_SIZED_FAMILIES = ("elementwise", "compare", "convert")


#: ops that take or make small array values (``_Emitter.vec_op``, ``rng_bit_generator``;
#: the ops that only move values: ``call``/``fusion`` inline them, a ``while`` loops over
#: their elements, a ``conditional`` selects them element by element), besides the
#: elementwise ops (``_vec_elementwise``: element by element)
_VEC_OPS = ("tuple", "get-tuple-element", "copy", "opt-barrier", "constant", "broadcast",
            "concatenate", "reshape", "slice", "rng-bit-generator", "call", "fusion",
            "conditional", "while", "bitcast", "transpose", "reverse", "iota",
            "dynamic-slice", "dynamic-update-slice")

#: ops that move the elements of small arrays by a static index map (``_move_map``)
_VEC_MOVES = ("broadcast", "concatenate", "reshape", "slice", "bitcast", "transpose", "reverse")

#: elementwise ops besides the element function tables: on small arrays, element by element
_VEC_ELEMENTWISE = ("compare", "select", "clamp", "convert", "bitcast-convert",
                    "reduce-precision", "real", "imag", "complex", "stochastic-convert")


def _vec_elementwise(op) -> bool:
    """Whether ``op`` applies element by element (HLO's elementwise ops), so that on small
    arrays each element goes through the scalar path."""
    return op in _VEC_ELEMENTWISE or op in ELEMENT_TABLES or op in WIDTH_OPS or (
        op in complex_elementwise.BINARY or op in complex_elementwise.UNARY or
        op in complex_elementwise.TO_REAL)


class Compiled:
    """A device function ``fn(*parameter storage values) -> result storage value(s)``;
    ``results``: the element types of its results (one per tuple element)."""

    #: whether the CPU applies it to whole arrays (``reduce.is_vectorizable``): reduce and
    #: reduce-window then combine in its pairwise tree order, else in a sequential fold
    vectorizable = True

    #: ``(while instruction name, iteration limit)`` of each loop, in code order, and
    #: ``(instruction name, error)`` of each run-time error site (``_Emitter.error_site``)
    loops: list = []
    #: int64[1] device array: 0, or ``2k + 1`` (loop ``k`` reached its limit) or ``2k + 2``
    #: (loop ``k``'s state came back unchanged with the condition holding)
    loop_status = None
    #: u64 device array of per-thread draw counts when it holds ``rng`` (``gpu/rng.py``)
    rng_counts = None
    #: compiled with ``call_index`` and holding rng-get-and-update-state: the deltas of
    #: one call (mod 2**128); the function then takes three more arguments, the call
    #: index and the state before the first call (low, high words, uint64), and the
    #: caller advances the interpreter's state by ``calls * state_delta``
    state_delta = None
    #: compiled in the serial mode (``gpu/serial.py``): the op must make all its calls
    #: from one thread in the CPU's call order, between :meth:`begin` and :meth:`finish`
    serial = False
    #: the serial mode's channels (``gpu/serial.Channel``), in argument order
    channels: tuple = ()

    def __init__(self, fn, params, results, tuple_result: bool, source: str):
        self.fn = fn
        self.params = params
        self.results = results
        self.tuple_result = tuple_result
        self.source = source

    @property
    def extra_params(self) -> list:
        """The names of the device function's arguments after its parameters (one per
        channel): kernels calling it take them last and pass them on."""
        return [c.name for c in self.channels]

    def begin(self, ctx) -> tuple:
        """Before the op's launch: the channels' device arguments, staged from the
        evaluation ``ctx`` (``gpu/serial.py``)."""
        return tuple(c.begin(ctx) for c in self.channels)

    def finish(self, ctx) -> None:
        """After the op's launch: each channel settles what the calls consumed."""
        for c in self.channels:
            c.finish(ctx)


_CACHE: dict = {}


def compile_computation(comp, module, *, call_index: bool = False,
                        serial: bool = False) -> Compiled | None:
    """``comp`` as a device function, or None when it does not qualify (see above).
    For a computation holding rng-get-and-update-state: ``call_index``, the caller
    calls it in the CPU's fixed order and passes the call index (``map``: element by
    element, row-major; ``reduce``'s sequential fold: output by output), used when the
    sites' call count is static (``Compiled.state_delta``); else ``serial``, the caller
    takes the serial mode (``gpu/serial.py``: ``Compiled.serial``, one thread in the
    CPU's call order, the channels' arguments); neither: None (the op calls it through
    the GPU interpreter, ``gpu/calls.py``)."""
    run = LOOP_RUN.get()
    limit = run.limit if run is not None else Limits().max_while_iterations
    device = run.device if run is not None else (0, 0, 1)
    mode = None
    if _holds_state(comp, module, {}):
        if call_index and _static_sites(comp, module):
            mode = "index"
        elif serial:
            mode = "serial"
        else:  # its calls advance the state (a dead site too): ``gpu/calls.py`` runs the op
            return None
    key = (id(comp), limit, device, mode)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is comp:
        compiled = hit[1]
    else:
        try:
            if _drops_effects(comp, module, {}):
                raise _Unsupported("an instruction with effects the root does not read")
            compiled = _compile(comp, module, limit, device, mode)
            compiled.vectorizable = is_vectorizable(comp, module)
        except (_Unsupported, GpuFallback, HloEvalError):  # no device form: ``gpu/calls.py``
            compiled = None
        _CACHE[key] = (comp, compiled)
    if compiled is not None and compiled.loops and run is not None:
        run.used[id(compiled)] = compiled
    if compiled is not None and compiled.rng_counts is not None and run is not None \
            and id(compiled) not in run.rng:  # each evaluation draws the same values
        run.rng[id(compiled)] = compiled
        compiled.rng_counts.copy_to_device(np.zeros(compiled.rng_counts.shape[0], np.uint64))
    return compiled


def _drops_effects(comp, module, memo) -> bool:
    """Whether ``comp`` (or a computation it calls) holds an instruction its root does not
    read that the CPU's interpreter evaluates all the same for its effects
    (``live_instructions``: an outfeed, a send, a side-effecting custom-call, a call of
    one...), other than the draws the device function accounts for itself (``rng``, and
    rng-get-and-update-state: the serial mode emits dead sites). The device function
    computes what the root reads, so it would drop that effect: such a computation is
    called one call at a time through the GPU interpreter instead (``gpu/calls.py``)."""
    from hloref.evaluator.interpreter import live_instructions
    if comp.name in memo:
        return memo[comp.name]
    memo[comp.name] = False  # recursion guard
    live = live_instructions(module, comp)
    read = {id(i) for i in _order(comp)}
    drops = any(id(i) in live and id(i) not in read
                and i.opcode not in ("rng", "rng-get-and-update-state")
                for i in comp.instructions) or any(
        _drops_effects(module.computations[n], module, memo)
        for i in comp.instructions for n in i.called_computation_names()
        if n in module.computations)
    memo[comp.name] = drops
    return drops


_CLASSES = ("sint", "uint", "pred", "f32", "f64", "narrow", "complex")


def _scalar_type(shape, *, rank0=True):
    """The element type of a scalar (``rank0=False``: of any one-element array, which
    holds one storage value just the same)."""
    if not isinstance(shape, ArrayShape) or (shape.rank != 0 if rank0 else shape.size != 1):
        raise _Unsupported("not a scalar")
    et = shape.element_type
    if type_class(et) not in _CLASSES:
        raise _Unsupported(f"{et.name}")
    return et


def _value_type(shape, *, rank0=True):
    """An element type, or a list of them for a tuple of scalars."""
    if isinstance(shape, TupleShape):
        return [_value_type(s, rank0=rank0) for s in shape.elements]
    return _scalar_type(shape, rank0=rank0)


def _any_type(shape):
    """The type of a value inside a computation: an element type (one element), a
    ``_VecType`` (2 to ``_VEC_MAX`` elements), or a list of them for a tuple."""
    if isinstance(shape, TupleShape):
        return [_any_type(s) for s in shape.elements]
    vec = _vec_shape(shape)
    return vec if vec is not None else _scalar_type(shape, rank0=False)


def _holds_state(comp, module, memo) -> bool:
    """Whether ``comp`` or a computation it calls holds rng-get-and-update-state."""
    if comp.name not in memo:
        memo[comp.name] = False  # recursion guard
        memo[comp.name] = any(
            i.opcode == "rng-get-and-update-state" or any(
                _holds_state(module.computations[n], module, memo)
                for n in i.called_computation_names() if n in module.computations)
            for i in comp.instructions)
    return memo[comp.name]


def _state_sites(comp, module):
    """The rng-get-and-update-state instructions one call of ``comp`` evaluates, in the
    CPU's order (its interpreter's plan: the live instructions, side effects included,
    in ``topological_order``; a nested ``call``/``fusion`` at its place): ``({(call path,
    id(instruction)): deltas of the call's earlier ones}, deltas of one call)``, both mod
    2**128. Any other op calling a computation that holds one (a loop, a conditional, a
    reduce...) may evaluate it a data-dependent number of times: not supported."""
    from hloref.evaluator.interpreter import live_instructions, topological_order
    sites: dict = {}
    total = 0
    memo: dict = {}

    def walk(c, path):
        nonlocal total
        live = live_instructions(module, c)
        for instr in topological_order(c):
            if id(instr) not in live:
                continue
            if instr.opcode == "rng-get-and-update-state":
                delta = instr.attrs.get("delta")
                if delta is None:
                    raise _Unsupported("rng-get-and-update-state without delta")
                sites[(path, id(instr))] = total
                total = (total + int(str(delta))) % 2**128
            elif instr.opcode in ("call", "fusion"):
                (callee,) = instr.called_computation_names()
                walk(module.computations[callee], path + (id(instr),))
            elif any(_holds_state(module.computations[n], module, memo)
                     for n in instr.called_computation_names() if n in module.computations):
                raise _Unsupported(f"rng-get-and-update-state under {instr.opcode}")

    walk(comp, ())
    return sites, total


def _static_sites(comp, module) -> bool:
    """Whether every rng-get-and-update-state one call of ``comp`` evaluates has a static
    place in the call (``_state_sites``: none under a loop, a conditional, a nested op)."""
    try:
        _state_sites(comp, module)
    except _Unsupported:
        return False
    return True


def _cpu_order(module, comp):
    """``comp``'s instructions as the CPU's interpreter plans them (``Interpreter._plan``):
    the live ones (what the root and the side effects need, a tuple's unread elements
    not: ``forward_tuples``) in ``topological_order``, each with the instruction whose
    value it forwards (``forwarded``: a get-tuple-element of a tuple), else None."""
    from hloref.evaluator.interpreter import forwarded, live_instructions, topological_order
    live = live_instructions(module, comp, forward_tuples=True)
    return [(i, forwarded(i)) for i in topological_order(comp) if id(i) in live]


def _order(comp):
    """The instructions reachable from the root, operands first."""
    seen, out = set(), []

    def visit(instr):
        if id(instr) in seen:
            return
        seen.add(id(instr))
        for o in instr.operands:
            visit(o)
        out.append(instr)

    visit(comp.root)
    return out


def _storage_constant(literal, et):
    arr = np.asarray(literal)
    if arr.size != 1:
        raise _Unsupported("non-scalar constant")
    return arr.reshape(-1).astype(et.dtype).view(storage_dtype(et))[0]


@cuda.jit(device=True)
def _store_c64(re, im):
    return np.complex64(complex(np.float32(re), np.float32(im)))


@cuda.jit(device=True)
def _store_c128(re, im):
    return np.complex128(complex(np.float64(re), np.float64(im)))


@cuda.jit(device=True)
def _complex_nonzero(re, im):
    return np.int64(1) if (re != 0 or im != 0) else np.int64(0)


def _part_type(et):
    return element_type("f32" if et.name == "c64" else "f64")


class _Emitter:
    """Generates the device function's lines: each value is a local name (a storage
    value), or a list of them for a tuple; nested ``call``/``fusion`` are inlined."""

    def __init__(self, module, limit: int = Limits().max_while_iterations, name: str = "",
                 device=(0, 0, 1), serial: bool = False):
        self.module = module
        self.device = device
        self.name = name
        self.rng_sites = 0
        #: ``_state_sites`` of a computation compiled with a call index, else None
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
        self.loops: list = []  # (while instruction name, limit)

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
        fn = self.bind("Z", _store_c64 if et.name == "c64" else _store_c128)
        return self.line(f"{fn}({r}[0], {r}[1])")

    def emit(self, comp, args, arg_types):
        """Lines computing ``comp`` on values ``args``; returns (root value, root type)."""
        names: dict[int, object] = {}
        types: dict[int, object] = {}
        for p in comp.parameters:
            names[id(p)] = args[p.parameter_number]
            types[id(p)] = arg_types[p.parameter_number]
            if _any_type(p.shape) != types[id(p)]:
                raise _Unsupported("parameter type")
        order = _cpu_order(self.module, comp) if self.serial else \
            [(i, None) for i in _order(comp)]
        for instr, target in order:
            if instr.opcode == "parameter":
                continue
            if target is not None:  # the CPU forwards the element (its tuple may be dead)
                names[id(instr)], types[id(instr)] = names[id(target)], types[id(target)]
                continue
            ops = [names[id(o)] for o in instr.operands]
            op_types = [types[id(o)] for o in instr.operands]
            names[id(instr)], types[id(instr)] = self.instruction(instr, ops, op_types)
        if _holds_sized(types[id(comp.root)]):  # sizes stay inside one computation
            raise _Unsupported("a computation returning runtime sizes")
        return names[id(comp.root)], types[id(comp.root)]

    def instruction(self, instr, ops, op_types):
        op = instr.opcode
        if op == "tuple":
            return list(ops), list(op_types)
        if op == "get-tuple-element":
            k = int(instr.attrs.get("index"))
            return ops[0][k], op_types[0][k]
        if op in ("copy", "opt-barrier", "add-dependency", "domain"):
            return ops[0], op_types[0]  # add-dependency: the value, its token dropped
        if op in ("set-dimension-size", "dynamic-reshape") or \
                any(_holds_sized(t) for t in op_types):
            return self.sized_op(instr, op, ops, op_types)
        vec = _vec_shape(instr.shape)
        holds_vec = any(_holds_vec(t) for t in op_types)
        if (vec is not None or holds_vec) and _vec_elementwise(op):
            return self.vec_elementwise(instr, ops, op_types, vec)
        if op not in _VEC_OPS and holds_vec:
            raise _Unsupported(f"{op} of a small array")
        if op == "rng-bit-generator":
            return self.rng_bit_generator(instr, ops, op_types)
        if op == "rng-get-and-update-state":
            return self.rng_state(instr)
        if op in ("constant", "iota", "dynamic-slice", "dynamic-update-slice") + _VEC_MOVES \
                and (vec is not None or holds_vec):
            return self.vec_op(instr, op, ops, op_types, vec)
        if op == "after-all":  # a token: no value, only an order the device does not need
            return "0", TOKEN
        if op in ("call", "fusion"):
            (callee,) = instr.called_computation_names()
            outer = self.call_path
            self.call_path = outer + (id(instr),)
            try:
                return self.emit(self.module.computations[callee], ops, op_types)
            finally:
                self.call_path = outer
        if op == "conditional":
            return self.conditional(instr, ops, op_types)
        if op == "while":
            return self.while_loop(instr, ops, op_types)
        if TOKEN in op_types or (op_types and any(isinstance(t, list) and TOKEN in t
                                                  for t in op_types)):
            raise _Unsupported(f"{op} of a token")
        if op == "scatter":
            return self.scatter(instr, ops, op_types)
        if op == "topk":
            if int(instr.attrs.get("k")) != 1 or len(ops) != 1:
                raise _Unsupported("topk of more than one element")
            index = _scalar_type(instr.shape.elements[1], rank0=False)
            return [ops[0], self.bind("C", _storage_constant(np.zeros(1), index))], \
                [op_types[0], index]
        if op in ("map", "reduce", "reduce-window", "sort", "gather", "pad",
                  "get-dimension-size"):
            return self.one_element(instr, op, ops, op_types)
        if op in _ONE_DEVICE:
            return self.one_device(instr, op, ops, op_types)
        if op in _ASYNC:
            return self.async_op(instr, op, ops, op_types)
        if op in _SCALAR_FORMS:
            return getattr(self, _SCALAR_FORMS[op])(instr, ops, op_types)
        if op in ("replica-id", "partition-id"):
            et = _scalar_type(instr.shape)
            k = self.device[0] if op == "replica-id" else self.device[1]
            return self.bind("C", _storage_constant(np.full(1, k), et)), et
        et = _scalar_type(instr.shape, rank0=False)
        if any(isinstance(t, list) for t in op_types):
            raise _Unsupported(f"{op} of a tuple")
        if op == "constant":
            return self.bind("C", _storage_constant(instr.literal, et)), et
        if op in _MOVES:  # one element in, the same element out
            if op_types[0] != et:
                raise _Unsupported(f"{op} changing the element type")
            return ops[_MOVES[op]], et
        if op == "iota":
            return self.bind("C", _storage_constant(np.zeros(1), et)), et
        if op == "reduce-precision":
            from .bitwise_convert import reduce_precision_fn
            if not et.is_float:
                raise _Unsupported("reduce-precision of a non-float")
            fn = self.bind("F", reduce_precision_fn(et, int(instr.attrs.get("exponent_bits")),
                                                    int(instr.attrs.get("mantissa_bits"))))
            return self.line(f"{fn}({ops[0]})"), et
        if op == "bitcast-convert" or (op == "bitcast" and op_types[0] != et):
            return self.bitcast_convert(ops[0], op_types[0], et), et
        if op == "dot":
            return self.scalar_dot(instr, ops, op_types, et), et
        if op == "select":
            p, a, b = ops
            return self.line(f"({a} if {p} != 0 else {b})"), et
        if op == "rng":
            return self.rng(instr, ops, op_types, et), et
        if not op_types:  # replica-id, partition-id, rng-get-and-update-state...
            raise _Unsupported(op)
        if type_class(op_types[0]) == "complex" or type_class(et) == "complex":
            return self.complex_instruction(instr, op, ops, op_types, et), et
        if op == "compare":
            src = op_types[0]
            direction = str(instr.attrs.get("direction"))
            if direction not in DIRECTIONS:
                raise _Unsupported(direction)
            cls = type_class(src)
            if cls in ("f32", "f64", "narrow") and str(instr.attrs.get("type", "")) == "TOTALORDER":
                cls = "key_" + cls
            fn = self.bind("F", DIRECTIONS[direction])
            return self.line(self.store(
                f"{fn}({self.load(ops[0], src, cls)}, {self.load(ops[1], src, cls)})", et)), et
        if op == "clamp":
            fn = self.bind("F", clamp_fn(op_types[1]))
        elif op == "convert":
            fn, cin, cout = convert_fn(op_types[0], et)
            f = self.bind("F", fn)
            return self.line(self.store(f"{f}({self.load(ops[0], op_types[0], cin)})", et,
                                        cout)), et
        elif op == "real":
            return ops[0], et
        elif op == "imag":
            fn = self.bind("F", zero)
        elif op in WIDTH_OPS:
            fn = self.bind("F", width_fn(op, op_types[0]))
        elif op in ELEMENT_TABLES:
            fn = self.bind("F", element_fn(op, op_types[0]))
        else:
            raise _Unsupported(op)
        args = ", ".join(self.load(o, t) for o, t in zip(ops, op_types))
        return self.line(self.store(f"{fn}({args})", et)), et

    def conditional(self, instr, ops, op_types):
        """Every branch computed (scalar computations have no effects, and an unselected
        branch's value is dropped), then the selected one: a pred selector picks the
        true or the false branch; an s32 index picks its branch, any index outside
        [0, N) the last one (the CPU's ``run_conditional``). Branches holding a loop or
        (serial mode) a state site: the selected one only (``conditional_blocks``)."""
        attrs = instr.attrs
        branches = attrs.get("branch_computations")
        if branches is not None:
            names = [str(c) for c in branches]
        else:
            names = [str(attrs.get("true_computation")), str(attrs.get("false_computation"))]
        sel, args, arg_types = ops[0], ops[1:], op_types[1:]
        if len(args) != len(names) or isinstance(op_types[0], (list, _VecType)):
            raise _Unsupported("conditional operands")
        loops, sites = len(self.loops), self.state_count
        start = len(self.lines)
        results = [self.emit(self.module.computations[n], [a], [t])
                   for n, a, t in zip(names, args, arg_types)]
        rtype = results[0][1]
        if any(t != rtype for _, t in results):
            raise _Unsupported("conditional branches of different types")
        # no loop of an unselected branch runs, and no state site of one counts
        if (len(self.loops) > loops or self.state_count > sites) and len(names) > 1:
            del self.lines[start:]
            del self.loops[loops:]
            return self.conditional_blocks(names, sel, args, arg_types, branches is None), rtype
        if branches is None:
            return self.choose(f"{sel} != 0", results[0][0], results[1][0]), rtype
        value = results[-1][0]
        for k in range(len(results) - 2, -1, -1):
            value = self.choose(f"{sel} == {k}", results[k][0], value)
        return value, rtype

    def conditional_blocks(self, names, sel, args, arg_types, pred_selector):
        """The selected branch only, in an if/elif block (the CPU's choice of branch);
        each branch assigns the same result names."""
        n = len(names)
        conds = [f"{sel} != 0", None] if pred_selector else \
            [f"{sel} == {k}" for k in range(n - 1)] + [None]
        result = None
        for k, (name, a, t) in enumerate(zip(names, args, arg_types)):
            self.statement(f"if {conds[k]}:" if k == 0 else
                           (f"elif {conds[k]}:" if conds[k] is not None else "else:"))
            outer = self.indent
            self.indent += "    "
            value, vtype = self.emit(self.module.computations[name], [a], [t])
            leaves, types = _flat(value, vtype)
            if TOKEN in types:
                raise _Unsupported("conditional with a token result")
            if result is None:
                result = [self.fresh() for _ in leaves]
            for r, v, lt in zip(result, leaves, types):
                self.statement(f"{r} = {self.normal(v, lt)}")
            self.indent = outer
        return _rebuild(result, vtype)

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

    def while_loop(self, instr, ops, op_types):
        """``while cond(state): state = body(state)`` as a loop over the state's scalars,
        at most ``limit`` body runs; a thread past it, or whose state comes back bit for
        bit unchanged with the condition holding, writes its code to ``loop_status`` and
        leaves the loop (the interpreter raises the error after the evaluation)."""
        attrs = instr.attrs
        cond = self.module.computations[str(attrs.get("condition"))]
        body = self.module.computations[str(attrs.get("body"))]
        stype = op_types[0]
        leaves, types = _flat(ops[0], stype)  # small arrays: one variable per element
        k = len(self.loops)
        draws, sites = self.rng_sites, self.state_count
        self.loops.append((instr.name, self.limit))
        if "LOOP_STATUS" not in self.ns:
            self.ns["LOOP_STATUS"] = cuda.to_device(np.zeros(1, np.int64))
            self.ns["cuda"] = cuda
        if TOKEN in types:
            raise _Unsupported("while with a token in its state")
        state = [self.line(self.normal(v, t)) for v, t in zip(leaves, types)]
        count = self.line("0")
        self.statement("while True:")
        outer = self.indent
        self.indent += "    "
        pred, ptype = self.emit(cond, [_rebuild(state, stype)], [stype])
        if isinstance(ptype, list) or not ptype.is_pred:
            raise _Unsupported("while condition result")
        self.statement(f"if {pred} == 0:")
        self.statement("    break")
        self.statement(f"if {count} >= {self.limit}:")
        self.statement(f"    cuda.atomic.max(LOOP_STATUS, 0, {LOOP_STATUS_TOP - (2 * k + 1)})")
        self.statement("    break")
        new, ntype = self.emit(body, [_rebuild(state, stype)], [stype])
        if ntype != stype:
            raise _Unsupported("while body result type")
        new = [self.line(self.normal(v, t)) for v, t in zip(_flat(new, ntype)[0], types)]
        same = " and ".join(self.same_bits(a, b, t) for a, b, t in zip(new, state, types))
        # a loop that draws or reads the rng state may change its state later
        if same and self.rng_sites == draws and self.state_count == sites:
            self.statement(f"if {same}:")
            self.statement(f"    cuda.atomic.max(LOOP_STATUS, 0, {LOOP_STATUS_TOP - (2 * k + 2)})")
            self.statement("    break")
        for a, b in zip(state, new):
            self.statement(f"{a} = {b}")
        self.statement(f"{count} = {count} + 1")
        self.indent = outer
        return _rebuild(state, stype), stype

    def one_element(self, instr, op, ops, op_types):
        """Ops that call a computation or move elements, on one-element arrays (every
        value here has one element): ``map`` applies its computation to the elements;
        ``reduce`` combines the one element with the init value (``to_apply(init...,
        x...)``, whatever the dimensions); ``reduce-window`` does so when the window of
        the one output covers the element, else gives the init value; ``sort`` keeps
        its operands (the comparator is never called); ``gather`` takes the one element
        (any start index is clamped to 0); ``pad`` gives the element when every low
        edge padding is 0 (the element sits at position ``low``), else the padding
        value; ``get-dimension-size`` is 1 (static dimensions only)."""
        if any(isinstance(t, list) for t in op_types):
            raise _Unsupported(f"{op} of a tuple")
        if op == "map":
            (callee,) = instr.called_computation_names()
            return self.emit(self.module.computations[callee], ops, op_types)
        if op == "sort":
            return (list(ops), list(op_types)) if len(ops) > 1 else (ops[0], op_types[0])
        if op in ("reduce", "reduce-window"):
            n = len(ops) // 2
            if len(ops) != 2 * n or n == 0:
                raise _Unsupported(f"{op} operands")
            xs, inits = ops[:n], ops[n:]
            if op == "reduce-window" and not _window_covers_element(instr.attrs.get("window"),
                                                                    instr.operands[0].shape.rank):
                return (list(inits), op_types[n:]) if n > 1 else (inits[0], op_types[n])
            (callee,) = instr.called_computation_names()
            return self.emit(self.module.computations[callee], inits + xs,
                             op_types[n:] + op_types[:n])
        et = _scalar_type(instr.shape, rank0=False)
        if op == "gather":
            if op_types[0] != et:
                raise _Unsupported("gather changing the element type")
            return ops[0], et
        if op == "pad":
            if op_types[0] != et or op_types[1] != et:
                raise _Unsupported("pad changing the element type")
            padding = instr.attrs.get("padding")
            return (ops[0] if all(int(p.low) == 0 for p in padding) else ops[1]), et
        shape = instr.operands[0].shape
        if any(shape.dynamic) or not et.is_integer:  # get-dimension-size
            raise _Unsupported("get-dimension-size of a dynamic dimension")
        return self.bind("C", _storage_constant(np.ones(1), et)), et

    def scatter(self, instr, ops, op_types):
        """A scatter of one-element arrays: the window (one element) fits only at start
        index 0, so the result is ``to_apply(operands..., updates...)`` where the one
        index is 0, else the operands (an out-of-bounds window is skipped); computed in
        an if/else block (an unused combiner's loop never runs)."""
        n = (len(ops) - 1) // 2
        if len(ops) != 2 * n + 1 or n == 0 or any(isinstance(t, list) for t in op_types):
            raise _Unsupported("scatter operands")
        if tuple(instr.attrs.get("input_batching_dims") or ()):
            raise _Unsupported("scatter with batching dimensions")
        xs, idx, upds = ops[:n], ops[n], ops[n + 1:]
        itype = op_types[n]
        if not itype.is_integer:
            raise _Unsupported("scatter indices")
        (callee,) = instr.called_computation_names()
        comp = self.module.computations[callee]
        result = [self.fresh() for _ in xs]
        self.statement(f"if {self.load(idx, itype)} == 0:")
        outer = self.indent
        self.indent += "    "
        value, vtype = self.emit(comp, xs + upds, op_types[:n] + op_types[n + 1:])
        if _leaves(vtype) != list(op_types[:n]):
            raise _Unsupported("scatter combiner type")
        for r, v, t in zip(result, _leaves(value), op_types[:n]):
            self.statement(f"{r} = {self.normal(v, t)}")
        self.indent = outer
        self.statement("else:")
        self.indent += "    "
        for r, v, t in zip(result, xs, op_types[:n]):
            self.statement(f"{r} = {self.normal(v, t)}")
        self.indent = outer
        return (result, list(op_types[:n])) if n > 1 else (result[0], op_types[0])

    def one_device(self, instr, op, ops, op_types):
        """Collectives of a module on one device (``replica_count x num_partitions ==
        1``): the one participant's value, as the CPU's collectives give it (all-reduce,
        all-gather, reduce-scatter, all-to-all, collective-broadcast: the operands;
        collective-permute: the operand when the pairs hold ``{0,0}``, else zeros). On
        several devices each call would be a rendezvous: the CPU's, in its order (a map body's
        or a reduce reducer's are unrolled over the devices: ``gpu/computation_devices.py``)."""
        if self.device[2] != 1:
            raise _Unsupported(f"{op} on several devices")
        if any(isinstance(t, list) for t in op_types):
            raise _Unsupported(f"{op} of a tuple")
        if op == "collective-permute":
            if len(ops) != 1 or instr.attrs.get("slice_sizes") is not None:
                raise _Unsupported("collective-permute with several operands")
            pairs = [tuple(int(v) for v in pr) for pr in instr.attrs.get("source_target_pairs")]
            if any(pr != (0, 0) for pr in pairs):
                raise _Unsupported("collective-permute naming another device")
            if (0, 0) in pairs:
                return ops[0], op_types[0]
            return self.bind("C", _storage_constant(np.zeros(1), op_types[0])), op_types[0]
        return (list(ops), list(op_types)) if len(ops) > 1 else (ops[0], op_types[0])

    def async_op(self, instr, op, ops, op_types):
        """The CPU's asynchronous pairs: ``async-start`` computes the wrapped op (a
        sugared ``X-start``) or its called computation at once and gives ``((operands...),
        result, context zeros...)``; ``async-update`` passes it on, ``async-done`` takes
        the result; ``copy-start`` gives ``(copy, source[, context])``, ``copy-done`` the
        copy. The dedicated collective pairs of a one-device module: ``all-reduce-start``
        gives the value and ``all-reduce-done`` passes it; ``all-gather-start`` gives
        ``(operand, value)``, ``collective-permute-start`` ``(operand, value, u32 context
        zeros...)``, and their ``-done`` takes the value."""
        if op in ("async-update", "all-reduce-done"):
            return ops[0], op_types[0]
        if op in ("async-done", "all-gather-done", "collective-permute-done"):
            return ops[0][1], op_types[0][1]
        if op == "all-reduce-start":
            return self.one_device(instr, "all-reduce", ops, op_types)
        if op == "copy-done":
            return ops[0][0], op_types[0][0]
        shape = instr.shape
        if not isinstance(shape, TupleShape) or len(shape.elements) < 2:
            raise _Unsupported(f"{op} shape")
        contexts, ctypes = [], []
        for s in shape.elements[2:]:
            et = _scalar_type(s, rank0=False)
            contexts.append(self.bind("C", _storage_constant(np.zeros(1), et)))
            ctypes.append(et)
        if op in ("all-gather-start", "collective-permute-start"):
            if len(ops) != 1 or (op == "all-gather-start" and ctypes) or \
                    any(t.name != "u32" for t in ctypes):
                raise _Unsupported(f"{op} operands")
            value, vtype = self.one_device(instr, op[:-len("-start")], ops, op_types)
            return [ops[0], value] + contexts, [op_types[0], vtype] + ctypes
        if op == "copy-start":
            if isinstance(op_types[0], list):
                raise _Unsupported("copy-start of a tuple")
            return [ops[0], ops[0]] + contexts[:1], [op_types[0], op_types[0]] + ctypes[:1]
        if instr.async_wrapped_opcode:
            import dataclasses
            inner = dataclasses.replace(instr, opcode=instr.async_wrapped_opcode,
                                        shape=shape.elements[1], async_wrapped_opcode=None)
            value, vtype = self.instruction(inner, ops, op_types)
        else:
            calls = instr.attrs.get("calls")
            if calls is None:
                raise _Unsupported("async-start without a computation")
            value, vtype = self.emit(self.module.computations[str(calls)], ops, op_types)
        return [list(ops), value] + contexts, [list(op_types), vtype] + ctypes

    def product(self, ops, op_types, et):
        """The one-term sum of products of two one-element operands by the dot rules
        (``scalar_dot``); the CPU's sums start at +0, so a float product of -0 gives +0."""
        cls = type_class(et)
        if cls in ("sint", "uint") and all(t.is_float for t in op_types):
            from hloref.types import F32  # integer_result_in_f32: in f32, converted
            return self.convert_value(self.product(ops, op_types, F32), F32, et)
        if cls == "complex":
            fn = self.bind("F", complex_elementwise.BINARY["multiply"])
            f64 = self.bind("N", np.float64)
            args = []
            for x, t in zip(ops, op_types):
                if type_class(t) in ("f32", "f64", "narrow"):  # exact, imaginary part 0
                    args += [f"{f64}({self.load(x, t)})", "0.0"]
                    continue
                if type_class(t) != "complex":  # integers and pred: converted to et first
                    x = self.convert_value(x, t, et)
                args += [f"{f64}({x}.real)", f"{f64}({x}.imag)"]
            p = self.line(f"{fn}({', '.join(args)})")
            return self.store_complex(f"({p}[0] + 0.0, {p}[1] + 0.0)", et)
        if cls in ("f32", "f64", "narrow"):
            f64 = self.bind("N", np.float64)
            terms = []
            for x, t in zip(ops, op_types):
                if type_class(t) in ("f32", "f64", "narrow"):
                    terms.append(f"{f64}({self.load(x, t)})")
                elif type_class(t) == "complex":
                    raise _Unsupported("complex operands of a real product")
                else:
                    terms.append(f"{f64}({self.load(self.convert_value(x, t, et), et)})")
            return self.line(self.store(f"{terms[0]} * {terms[1]} + 0.0", et))
        if cls in ("sint", "uint", "pred"):
            if any(type_class(t) == "complex" for t in op_types):
                raise _Unsupported("complex operands of a real product")
            conv = [self.convert_value(x, t, et) for x, t in zip(ops, op_types)]
            fn = self.bind("F", element_fn("multiply", et))
            return self.line(self.store(f"{fn}({self.load(conv[0], et)}, "
                                        f"{self.load(conv[1], et)})", et))
        raise _Unsupported(f"product to {et.name}")

    def convolution(self, instr, ops, op_types):
        """A convolution of one-element operands (one window tap, one output): the
        product ``lhs x rhs`` by the dot rules when the tap lands on the element (every
        spatial dimension's low padding 0: the element sits at base-dilated position
        ``low``), else the padding zero times rhs (the CPU multiplies the padded input:
        0 x inf is NaN, 0 x -1 is -0)."""
        et = _scalar_type(instr.shape, rank0=False)
        if len(ops) != 2 or any(isinstance(t, list) for t in op_types):
            raise _Unsupported("convolution operands")
        window = instr.attrs.get("window")
        dims = list(window.dims) if window is not None and hasattr(window, "dims") else []
        lhs = ops[0]
        if any(int(getattr(d, "padding_low", 0)) != 0 for d in dims):
            lhs = self.bind("C", _storage_constant(np.zeros(1), op_types[0]))
        return self.product([lhs, ops[1]], op_types, et), et

    def real_operand(self, x, t):
        """Storage value ``x`` of a real float type as an f64 expression (exact)."""
        if type_class(t) not in ("f32", "f64", "narrow"):
            raise _Unsupported(f"{t.name} operand")
        return f"{self.bind('N', np.float64)}({self.load(x, t)})"

    def f64_fn(self, name):
        from hloref.types import F64
        return self.bind("F", element_fn(name, F64))

    def cholesky(self, instr, ops, op_types):
        """1x1: ``sqrt(a)`` (lower and upper alike; NaN for a negative a), computed in
        f64 and rounded once; complex: the root of the real part, imaginary part 0."""
        et = _scalar_type(instr.shape, rank0=False)
        (a,), (t,) = ops, op_types
        if t != et:
            raise _Unsupported("cholesky changing the type")
        sqrt = self.f64_fn("sqrt")
        if type_class(et) == "complex":
            root = self.line(f"{sqrt}({self.bind('N', np.float64)}({a}.real))")
            return self.store_complex(f"({root}, 0.0)", et), et
        return self.line(self.store(f"{sqrt}({self.real_operand(a, t)})", et)), et

    def triangular_solve(self, instr, ops, op_types):
        """1x1: the CPU's ``0 + (1 / a) x b`` in f64 (it multiplies b by the triangle's
        inverse, a sum from +0), ``0 + 1 x b`` with ``unit_diagonal``; left_side and
        transpose_a do not change a 1x1 real triangle. Complex (``complex_triangular_solve``):
        the CPU's c128 steps."""
        et = _scalar_type(instr.shape, rank0=False)
        (a, b), (ta, tb) = ops, op_types
        unit = str(instr.attrs.get("unit_diagonal", "false")).lower() in ("true", "1")
        if ta == et and tb == et and type_class(et) == "complex":
            return self.complex_triangular_solve(instr, a, b, et, unit), et
        if ta != et or tb != et or type_class(et) not in ("f32", "f64", "narrow"):
            raise _Unsupported("triangular-solve types")
        div, mul = self.f64_fn("divide"), self.f64_fn("multiply")
        f64 = self.bind("N", np.float64)
        diag = f"{f64}(1.0)" if unit else self.real_operand(a, ta)
        inv = self.line(f"{div}({f64}(1.0), {diag})")
        x = self.line(f"{mul}({inv}, {self.real_operand(b, tb)}) + 0.0")  # a sum from +0
        return self.line(self.store(x, et)), et

    def complex_triangular_solve(self, instr, a, b, et, unit):
        """1x1 complex, the CPU's c128 arithmetic (``evaluator/linalg.py``): the triangle
        ``t`` is ``a`` (``1 + 0i`` with ``unit_diagonal``), conjugated for ADJOINT; its
        inverse is numpy's Smith division ``(1 + 0i) / t`` (``complex_elementwise.smith``,
        no Annex G recovery: numpy's ``/``); then einsum's one-term sum of products from
        +0: ``inv x b`` (left_side) or ``b x inv``, each part ``re1 x re2 - im1 x im2``
        and ``re1 x im2 + im1 x re2`` plus 0; rounded once to c64."""
        from hloref.evaluator.linalg import transpose_mode
        trans = transpose_mode(instr.attrs.get("transpose_a") or "NO_TRANSPOSE")
        left = str(instr.attrs.get("left_side", "false")).lower() in ("true", "1")
        f64 = self.bind("N", np.float64)
        tr, ti = ("1.0", "0.0") if unit else (f"{a}.real", f"{a}.imag")
        tr, ti = self.line(f"{f64}({tr})"), self.line(f"{f64}({ti})")
        if trans == "ADJOINT":
            ti = self.line(f"-{ti}")
        inv = self.line(f"{self.bind('F', complex_elementwise.smith)}({f64}(1.0), "
                        f"{f64}(0.0), {tr}, {ti})")
        ir, ii = f"{inv}[0]", f"{inv}[1]"
        br, bi = self.line(f"{f64}({b}.real)"), self.line(f"{f64}({b}.imag)")
        (xr, xi), (yr, yi) = ((ir, ii), (br, bi)) if left else ((br, bi), (ir, ii))
        re = self.line(f"{xr} * {yr} - {xi} * {yi}")
        im = self.line(f"{xr} * {yi} + {xi} * {yr}")
        return self.store_complex(f"({re} + 0.0, {im} + 0.0)", et)

    def fft(self, instr, ops, op_types):
        """Length 1 in every transformed dimension: FFT and IFFT give the element; RFFT
        the real element with imaginary part 0; IRFFT the real part."""
        et = _scalar_type(instr.shape, rank0=False)
        (x,), (t,) = ops, op_types
        if any(int(v) != 1 for v in instr.attrs.get("fft_length")):
            raise _Unsupported("fft length")
        kind = str(instr.attrs.get("fft_type")).upper()
        if kind in ("FFT", "IFFT") and t == et and type_class(t) == "complex":
            return x, et
        if kind == "RFFT" and type_class(et) == "complex":
            return self.store_complex(f"({self.real_operand(x, t)}, 0.0)", et), et
        if kind == "IRFFT" and type_class(t) == "complex" and type_class(et) != "complex":
            return self.line(self.store(f"{self.bind('N', np.float64)}({x}.real)", et)), et
        raise _Unsupported(f"fft {kind}")

    def epsilon(self, instr, et):
        from hloref.evaluator.linalg import xla_epsilon
        return repr(float(xla_epsilon(instr.attrs.get("epsilon"), et)))

    def batch_norm_operands(self, instr, ops, op_types, arity):
        """``(element type, real operands, f64 divide, f64 sqrt)`` of a one-element
        batch-norm-*: every operand and result of one type (training and grad return a
        3-tuple, inference an array)."""
        shape = instr.shape
        if instr.opcode != "batch-norm-inference":
            if not isinstance(shape, TupleShape) or len(shape.elements) != 3:
                raise _Unsupported(f"{instr.opcode} shape")
            shape = shape.elements[0]
        et = _scalar_type(shape, rank0=False)
        if len(ops) != arity or any(t != et for t in op_types):
            raise _Unsupported(f"{instr.opcode} types")
        operands = [self.real_operand(o, t) for o, t in zip(ops, op_types)]
        return et, operands, self.f64_fn("divide"), self.f64_fn("sqrt")

    def batch_norm_inference(self, instr, ops, op_types):
        """One element: ``(x - mean) x (1 / sqrt(variance + epsilon) x scale) + offset``
        in f64, rounded once (the CPU's order of operations)."""
        et, (x, scale, offset, mean, var), div, sqrt = self.batch_norm_operands(instr, ops,
                                                                                op_types, 5)
        inv = self.line(f"{div}(1.0, {sqrt}({var} + {self.epsilon(instr, et)}))")
        y = self.line(f"({x} - {mean}) * ({inv} * {scale}) + {offset}")
        return self.line(self.store(y, et)), et

    def batch_norm_training(self, instr, ops, op_types):
        """One element: mean ``0 + x`` (a sum from +0), centred ``x - mean``, variance
        ``centred^2``, output ``centred x (1 / sqrt(var + epsilon) x scale) + offset`` in
        f64, each rounded once: ``(output, mean, variance)``."""
        et, (x, scale, offset), div, sqrt = self.batch_norm_operands(instr, ops, op_types, 3)
        mean = self.line(f"{x} + 0.0")  # a mean is a sum from +0: -0 gives +0
        centred = self.line(f"{x} - {mean}")
        var = self.line(f"{centred} * {centred}")
        inv = self.line(f"{div}(1.0, {sqrt}({var} + {self.epsilon(instr, et)}))")
        y = self.line(f"{centred} * ({inv} * {scale}) + {offset}")
        out = [self.line(self.store(v, et)) for v in (y, mean, var)]
        return out, [et, et, et]

    def shuffle(self, instr, ops, op_types):
        """One element: rotate and permute (whose coordinates clamp) give the element."""
        et = _scalar_type(instr.shape, rank0=False)
        if len(ops) != 1 or op_types[0] != et or str(instr.attrs.get("mode")) not in (
                "rotate", "permute"):
            raise _Unsupported("shuffle")
        return ops[0], et

    def scan(self, instr, ops, op_types):
        """Along a dimension of length 1: one call ``to_apply(inputs..., carries...)``,
        whose results are the outputs (stacked: one element) and the final carries."""
        nc = int(instr.attrs.get("num_carries") or 0)
        if len(ops) - nc < 1 or nc < 0 or any(isinstance(t, list) for t in op_types):
            raise _Unsupported("scan operands")
        (callee,) = instr.called_computation_names()
        value, vtype = self.emit(self.module.computations[str(callee)], ops, op_types)
        want = _value_type(instr.shape, rank0=False)
        if isinstance(want, list) != isinstance(vtype, list) or (
                _leaves(want) != _leaves(vtype)):
            raise _Unsupported("scan result types")
        return value, vtype

    def select_and_scatter(self, instr, ops, op_types):
        """One operand element and one window: the window holds the element when some
        position ``k - low`` is 0 (no dilations), and then the result is
        ``scatter(init, source)`` (a single candidate: ``select``'s answers are never
        used), else ``init``. A ``select`` holding a loop or a draw is called as the CPU
        calls it (``select_calls``), its answers dropped: its loops run (and stop at the
        iteration limit, as the CPU's), its draws are made."""
        et = _scalar_type(instr.shape, rank0=False)
        if len(ops) != 3 or any(isinstance(t, list) for t in op_types) or op_types[0] != et:
            raise _Unsupported("select-and-scatter operands")
        window = instr.attrs.get("window")
        dims = list(window.dims) if window is not None and hasattr(window, "dims") else []
        if any(int(getattr(d, "base_dilation", 1) or 1) != 1 or
               int(getattr(d, "window_dilation", 1) or 1) != 1 for d in dims):
            raise _Unsupported("select-and-scatter with dilations")
        select = self.module.computations[str(instr.attrs.get("select"))]
        probe = _Emitter(self.module, self.limit, self.name + "/select", self.device,
                         self.serial)
        probe.emit(select, ["a", "b"], [et, et])
        covers = _window_covers_element(window, instr.operands[0].shape.rank)
        calls = select_calls(dims) if covers else 0
        if (probe.loops or probe.rng_sites or probe.state_count) and calls:
            zero = self.bind("C", _storage_constant(np.zeros(1), et))
            self.statement(f"for {self.fresh()} in range({calls}):")
            outer = self.indent
            self.indent += "    "
            self.emit(select, [ops[0], zero], [et, et])
            self.statement("pass")
            self.indent = outer
        _, source, init = ops
        if not covers:
            if op_types[2] != et:
                raise _Unsupported("select-and-scatter init type")
            return init, et
        scatter = self.module.computations[str(instr.attrs.get("scatter"))]
        value, vtype = self.emit(scatter, [init, source], [op_types[2], op_types[1]])
        if vtype != et:
            raise _Unsupported("select-and-scatter scatter type")
        return value, vtype

    def scaled_dot(self, instr, ops, op_types):
        """One-element real operands and scales (integers and pred by value): each operand
        exactly in f64 times its scale in f64 (a rank-0 scale is 1: the CPU ignores its
        value), then the product of the two by the dot rules of f64 operands (``product``:
        a sum from +0, rounded once; integer and pred results convert the f64 values),
        float operands with an integer result through f32 (``integer_result_in_f32``)."""
        from hloref.types import F32, F64
        et = _scalar_type(instr.shape, rank0=False)
        if len(ops) != 4 or any(isinstance(t, list) or type_class(t) not in
                                ("f32", "f64", "narrow", "sint", "uint", "pred")
                                for t in op_types):
            raise _Unsupported("scaled-dot operands")
        scaled = []
        for k in (0, 1):
            x, s = (self.convert_value(ops[j], op_types[j], F64) for j in (k, k + 2))
            rank, srank = instr.operands[k].shape.rank, instr.operands[k + 2].shape.rank
            if srank == 0:  # the CPU's rule: a rank-0 scale is 1
                scaled.append(x)
            elif srank != rank:  # the CPU's error (it runs the computation)
                raise HloEvalError(f"scaled-dot: scale of rank {srank} for an operand of "
                                   f"rank {rank}")
            else:
                scaled.append(self.line(f"{x} * {s}"))
        cls = type_class(et)
        if cls in ("sint", "uint") and all(t.is_float for t in op_types[:2]):
            wide = self.product(scaled, [F64, F64], F32)
            return self.convert_value(wide, F32, et), et
        if cls in ("sint", "uint"):  # the f64 values converted to the result type, multiplied
            conv = [self.convert_value(x, F64, et) for x in scaled]
            fn = self.bind("F", element_fn("multiply", et))
            return self.line(self.store(f"{fn}({self.load(conv[0], et)}, "
                                        f"{self.load(conv[1], et)})", et)), et
        return self.product(scaled, [F64, F64], et), et

    def batch_norm_grad(self, instr, ops, op_types):
        """One element (n = 1), the CPU's f64 arithmetic: ``ve = variance + epsilon``,
        ``inv = 1 / sqrt(ve)``, ``c = x - mean``, sums from +0 ``sdy = dy + 0``, ``sdc =
        dy x c + 0``; results ``(scale x inv) x (dy - sdy - c x (sdc / ve))``, ``sdc x
        inv``, ``sdy``, each rounded once."""
        et, (x, scale, mean, var, dy), div, sqrt = self.batch_norm_operands(instr, ops,
                                                                             op_types, 5)
        ve = self.line(f"{var} + {self.epsilon(instr, et)}")
        inv = self.line(f"{div}(1.0, {sqrt}({ve}))")
        c = self.line(f"{x} - {mean}")
        dyv = self.line(dy)
        sdy = self.line(f"{dyv} + 0.0")
        sdc = self.line(f"{dyv} * {c} + 0.0")
        k = self.line(f"{div}({scale} * {inv}, 1.0)")
        g = self.line(f"{k} * ({dyv} - {sdy} - {c} * {div}({sdc}, {ve}))")
        out = [self.line(self.store(v, et)) for v in (g, f"{sdc} * {inv}", sdy)]
        return out, [et, et, et]

    def ragged_dot(self, instr, ops, op_types):
        """One group, one element: the lhs element is in group 0 when the group size is
        at least 1 (its rows start at 0); the product by the dot rules of the lhs (or,
        outside the group, a zero of its type) and rhs; a ragged batch dimension only
        partitions the batch, so the product whatever the size."""
        et = _scalar_type(instr.shape, rank0=False)
        if len(ops) != 3 or any(isinstance(t, list) for t in op_types):
            raise _Unsupported("ragged-dot operands")
        if instr.attrs.get("algorithm") is not None:
            raise _Unsupported("ragged-dot with an algorithm")
        lhs, rhs, sizes = ops
        st = op_types[2]
        if not st.is_integer:
            raise _Unsupported("ragged-dot group sizes")
        (ragged,) = tuple(int(d) for d in instr.attrs.get("lhs_ragged_dims"))
        batch = [int(d) for d in (instr.attrs.get("lhs_batch_dims") or ())]
        if ragged not in batch:
            zero = self.bind("C", _storage_constant(np.zeros(1), op_types[0]))
            lhs = self.line(f"({lhs} if {self.load(sizes, st)} >= 1 else {zero})")
        return self.product([lhs, rhs], op_types[:2], et), et

    def stochastic_convert(self, instr, ops, op_types):
        """The CPU's rule (``bitwise_convert.stochastic_round``) on the operand's exact value
        and its random bits, wrapped to the signed result type."""
        from hloref.evaluator.bitwise_convert import check_stochastic_convert, stochastic_limits
        from .bitwise_convert import stochastic_round
        et = _scalar_type(instr.shape, rank0=False)
        if len(ops) != 2 or any(isinstance(t, list) for t in op_types):
            raise _Unsupported("stochastic-convert operands")
        src, rt = op_types
        if type_class(src) not in ("f32", "f64", "narrow"):
            raise _Unsupported(f"stochastic-convert of {src.name}")
        check_stochastic_convert(src, rt, et)  # HloEvalError: the CPU's error
        lo, hi, f_lo, f_hi = stochastic_limits(src, et)
        fn = self.bind("F", stochastic_round)
        consts = [self.bind("C", c) for c in (np.float64(2.0 ** src.bits), np.float64(f_lo),
                                               np.float64(f_hi), np.int64(lo), np.int64(hi))]
        args = ", ".join([self.real_operand(ops[0], src), self.load(ops[1], rt)] + consts)
        return self.line(self.store(f"{fn}({args})", et)), et

    def rng(self, instr, ops, op_types, et):
        """A draw of ``rng`` (``gpu/rng.py``: a Philox counter per draw, from the thread,
        its draw count and the instruction's site number), by the CPU's rules for the
        distribution; types the CPU rejects (pred, complex, integer normals) stay its."""
        from .rng import site_normal, site_uniform_float, site_uniform_int
        dist = str(instr.attrs.get("distribution"))
        cls = type_class(et)
        if len(ops) != 2 or any(t != et for t in op_types):
            raise _Unsupported("rng operands")
        if cls not in ("sint", "uint", "f32", "f64", "narrow"):
            raise _Unsupported(f"rng of {et.name}")
        if dist == "rng_uniform":
            make = site_uniform_int if et.is_integer else site_uniform_float
        elif dist == "rng_normal" and et.is_float:
            make = site_normal
        else:
            raise _Unsupported(f"rng {dist} of {et.name}")
        if "RNG_COUNTS" not in self.ns:
            slots = max(1, int(config.MAX_BLOCKS) * int(config.THREADS_PER_BLOCK))
            self.ns["RNG_COUNTS"] = cuda.to_device(np.zeros(slots, np.uint64))
        site = zlib.crc32(f"{self.name}/{self.rng_sites}".encode()) & 0x7FFFFFFF
        self.rng_sites += 1
        fn = self.bind("F", make(cls))
        a, b = (self.load(x, et) for x in ops)
        return self.line(f"{fn}({a}, {b}, RNG_COUNTS, {site}, {self.bind('P', type_params(et))})")

    def rng_state(self, instr):
        """rng-get-and-update-state as a small ``u64[2]`` ``[low, high]`` value. With a
        call index, at a site ``_state_sites`` found: the state before the first call,
        plus the call index times one call's deltas, plus the deltas of this call's
        earlier sites (``gpu/rng.py``: ``state_at``). In the serial mode: the state
        before the op plus the deltas consumed so far, read from the state channel,
        this site's delta then added (``gpu/rng.py``: ``take_state``)."""
        from .rng import state_at, take_state
        vec = _vec_shape(instr.shape)
        m = 2**64 - 1
        if self.serial:
            delta = instr.attrs.get("delta")
            if delta is None:
                raise _Unsupported("rng-get-and-update-state without delta")
            if vec is None or vec.n != 2 or vec.et.name != "u64":
                raise _Unsupported("rng-get-and-update-state shape")
            delta = int(str(delta)) % 2**128
            words = [self.bind("C", np.uint64(v)) for v in (delta & m, delta >> 64)]
            self.state_count += 1
            r = self.line(f"{self.bind('F', take_state)}(state_io, {', '.join(words)})")
            return (self.line(f"{r}[0]"), self.line(f"{r}[1]")), vec
        offset = None if self.state_sites is None else \
            self.state_sites.get((self.call_path, id(instr)))
        if offset is None:
            raise _Unsupported("rng-get-and-update-state (the CPU's global state)")
        if vec is None or vec.n != 2 or vec.et.name != "u64":
            raise _Unsupported("rng-get-and-update-state shape")
        words = [self.bind("C", np.uint64(v)) for v in (
            self.state_delta & m, self.state_delta >> 64, offset & m, offset >> 64)]
        r = self.line(f"{self.bind('F', state_at)}(state_k, state_lo, state_hi, "
                      f"{', '.join(words)})")
        return (self.line(f"{r}[0]"), self.line(f"{r}[1]")), vec

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

    def sized_op(self, instr, op, ops, op_types):
        """One-element arrays with runtime dimension sizes, by the CPU's rules
        (``evaluator/dynamic.py``; sizes 0 or 1 here, 0: the element is padding):
        ``set-dimension-size`` sets dimension ``d``'s size to the run-time ``n`` (outside
        ``[0, bound]``: the CPU's HloEvalError, recorded and raised after the evaluation);
        ``get-dimension-size`` reads it; elementwise ops compute on the element, the
        result's size the smallest of its same-rank operands'; ``reduce`` gives
        ``to_apply(init, x)`` when every reduced dimension has its element, else the
        init (the combiner is not called), kept dimensions keep their sizes;
        ``dynamic-reshape`` lays the valid elements (0 or 1) out in the run-time sizes
        (each in ``[0, bound]``, their product the valid count, else the CPU's errors),
        a zero where none is valid (the CPU embeds the valid part in zeros); tuples and
        ``copy`` pass them. Any other op given one runs on the CPU."""
        plain, sizes, types = [], [], []
        for x, t in zip(ops, op_types):
            if isinstance(t, _SizedType):
                plain.append(x[0])
                sizes.append(list(x[1]))
                types.append(t.et)
            elif isinstance(t, (list, _VecType)) or t == TOKEN or _holds_sized(t):
                raise _Unsupported(f"{op} of a tuple with runtime sizes")
            else:
                plain.append(x)
                sizes.append(None)
                types.append(t)
        i64 = self.bind("N", np.int64)
        shapes = [o.shape for o in instr.operands]

        if op in ("set-dimension-size", "dynamic-reshape"):
            x, shape = plain[0], shapes[0]
            if shape.size != 1 or any(s is not None for s in sizes[1:]) or \
                    not all(t.is_integer for t in types[1:]):
                raise _Unsupported(f"{op} operands")
            ns = [self.line(f"{i64}({self.load(v, t)})") for v, t in zip(plain[1:], types[1:])]
            if op == "set-dimension-size":
                (d,) = tuple(int(v) for v in instr.attrs.get("dimensions"))
                bound = shape.dims[d]
                self.record_if(f"{ns[0]} < 0 or {ns[0]} > {bound}", instr.name, HloEvalError(
                    f"set-dimension-size: size outside [0, {bound}] for dimension {d}",
                    instruction=instr.name))
                out = list(sizes[0] or shape.dims)
                out[d] = ns[0]
                return self.sized_value(x, types[0], shape.dims, out)
            dims = tuple(instr.shape.dims)
            if instr.shape.size != 1 or len(ns) != len(dims):
                raise _Unsupported("dynamic-reshape to more than one element")
            self.record_if(" or ".join(f"{n} < 0 or {n} > {b}" for n, b in zip(ns, dims)),
                           instr.name, HloEvalError(
                               f"dynamic-reshape: a size outside [0, bound] of {list(dims)}",
                               instruction=instr.name))
            count = " * ".join(str(v) for v in (sizes[0] or [1])) or "1"
            valid = self.line(f"{i64}({count})")
            prod = " * ".join(ns) or "1"
            self.record_if(f"{prod} != {valid}", instr.name, HloEvalError(
                "dynamic-reshape: the valid elements cannot take the dimensions",
                instruction=instr.name))
            zero = self.bind("C", _storage_constant(np.zeros(1), types[0]))
            value = self.line(f"({x} if {valid} == 1 else {zero})")
            return self.sized_value(value, types[0], dims, ns)
        if op == "get-dimension-size":
            (d,) = tuple(int(v) for v in instr.attrs.get("dimensions"))
            et = _scalar_type(instr.shape)
            if sizes[0] is None or et.name != "s32":
                raise _Unsupported("get-dimension-size")
            return self.line(self.store(f"{i64}({sizes[0][d]})", et)), et
        if op == "copy":
            return ops[0], op_types[0]
        if op == "reduce":
            return self.sized_reduce(instr, plain, sizes, types)
        from hloref.evaluator.registry import load_all
        entry = load_all().get(op)
        if not _vec_elementwise(op) or entry is None or (
                entry.family not in _SIZED_FAMILIES and op not in (
                    "reduce-precision", "stochastic-convert", "bitcast-convert")):
            raise _Unsupported(f"{op} of a value with runtime sizes")
        rank = len(instr.shape.dims)
        if op == "bitcast-convert" and shapes[0].rank != rank:
            raise _Unsupported("bitcast-convert changing the rank of a sized value")
        merged = None
        for s, shape in zip(sizes, shapes):
            if s is None or shape.rank != rank:
                continue
            merged = list(s) if merged is None else [
                a if a is b else self.line(f"min({a}, {b})") for a, b in zip(merged, s)]
        value, et = self.instruction(instr, plain, types)
        if merged is None:
            return value, et
        return self.sized_value(value, et, instr.shape.dims, merged)

    def sized_reduce(self, instr, xs_inits, sizes, types):
        """``reduce`` of one-element operands with runtime sizes (``sized_op``)."""
        n = len(xs_inits) // 2
        if len(xs_inits) != 2 * n or n == 0 or any(s is not None for s in sizes[n:]):
            raise _Unsupported("reduce of sized inits")
        given = [s for s in sizes[:n] if s is not None]
        if any(any(a is not b for a, b in zip(s, given[0])) for s in given[1:]):
            raise _Unsupported("reduce of operands with different runtime sizes")
        merged = given[0]
        dims = tuple(int(d) for d in instr.attrs.get("dimensions"))
        reduced = [str(merged[d]) for d in dims if not isinstance(merged[d], int)]
        if any(isinstance(merged[d], int) and merged[d] != 1 for d in dims):
            raise _Unsupported("reduce of a zero-size dimension")
        (callee,) = instr.called_computation_names()
        xs, inits = xs_inits[:n], xs_inits[n:]
        rtypes = types[n:]
        result = [self.fresh() for _ in inits]
        cond = " and ".join(f"{r} == 1" for r in reduced) or "True"
        self.statement(f"if {cond}:")
        outer = self.indent
        self.indent += "    "
        value, vtype = self.emit(self.module.computations[callee], inits + xs,
                                 rtypes + types[:n])
        if _leaves(vtype) != list(rtypes):
            raise _Unsupported("reduce combiner type")
        for r, v, t in zip(result, _leaves(value), rtypes):
            self.statement(f"{r} = {self.normal(v, t)}")
        self.indent = outer
        self.statement("else:")
        self.indent += "    "
        for r, v, t in zip(result, inits, rtypes):
            self.statement(f"{r} = {self.normal(v, t)}")
        self.indent = outer
        kept = [merged[k] for k in range(len(merged)) if k not in dims]
        leaves = result if n > 1 else result[:1]
        shapes = result_shapes(instr.shape)
        out = []
        for r, t, shape in zip(leaves, rtypes, shapes):
            out.append(self.sized_value(r, t, shape.dims, kept) if kept else (r, t))
        if n > 1:
            return [v for v, _ in out], [t for _, t in out]
        return out[0]

    def sized_value(self, value, et, dims, out):
        """``value`` of ``et`` with runtime sizes ``out`` (ints or int64 locals) in
        dimensions ``dims``; the full extent known at compile time: a static value."""
        if all(isinstance(v, int) and v == d for v, d in zip(out, dims)):
            return value, et
        return (value, tuple(out)), _SizedType(et, dims)

    def vec_op(self, instr, op, ops, op_types, vec):
        """Small array values (``_VecType``: a tuple of storage values, row-major) made or
        moved: a constant; iota (the CPU's values); the moves (``_VEC_MOVES``: broadcast,
        concatenate, reshape, slice, transpose, reverse, bitcast in the operand's and the
        result's layouts) by their static index map (``_move_map``: the CPU's numpy
        rule on element indices), a bitcast to another type of the same width then
        element by element; dynamic-slice and dynamic-update-slice (``dynamic_slice``).
        A result of one element is that storage value."""
        if op in ("constant", "iota"):
            if vec is None:
                raise _Unsupported(f"{op} of a small array")
            if op == "constant":
                flat = np.asarray(instr.literal).reshape(-1)
            else:
                from hloref.evaluator.shape_ops import iota
                flat = np.asarray(iota(shape=instr.shape,
                                       iota_dimension=int(instr.attrs.get("iota_dimension"))))
                flat = flat.reshape(-1)
            if flat.size != vec.n:
                raise _Unsupported(f"{op} size")
            return tuple(self.bind("C", _storage_constant(flat[i:i + 1], vec.et))
                         for i in range(vec.n)), vec
        et = _any_type(instr.shape)
        if isinstance(et, list):
            raise _Unsupported(f"{op} to a tuple")
        et = et.et if isinstance(et, _VecType) else et
        if op in ("dynamic-slice", "dynamic-update-slice"):
            picked = self.dynamic_slice(instr, op, ops, op_types, et)
        else:
            flat, ftypes = self.operand_elements(instr.operands, ops, op_types)
            picked = [flat[i] for i in _move_map(instr, op)]
            src = ftypes[0]
            if any(t != src for t in ftypes):
                raise _Unsupported(f"{op} of different element types")
            if src != et:  # a same-width bitcast: element by element
                if op != "bitcast":
                    raise _Unsupported(f"{op} changing the element type")
                picked = [self.bitcast_convert(x, src, et) for x in picked]
        if len(picked) == 1:
            return picked[0], et
        if vec is None or len(picked) != vec.n:
            raise _Unsupported(f"{op} of a small array")
        return tuple(picked), vec

    def operand_elements(self, operands, ops, op_types):
        """The storage values of operand instructions ``operands`` (values ``ops``)
        concatenated (each row-major) and their element types; each operand's element
        count checked against its shape."""
        flat, types = [], []
        for o, x, t in zip(operands, ops, op_types):
            if isinstance(t, list) or not isinstance(o.shape, ArrayShape) or \
                    any(o.shape.dynamic) or TOKEN == t:
                raise _Unsupported(f"{o.opcode} operands")
            names, ts = _flat(x, t)
            if len(names) != o.shape.size:
                raise _Unsupported(f"{o.opcode} operand size")
            flat += names
            types += ts
        return flat, types

    def dynamic_slice(self, instr, op, ops, op_types, et):
        """dynamic-slice and dynamic-update-slice on small arrays, the CPU's rule: each
        start (a scalar, or one rank-1 array of them) clamped to ``[0, dim - size]``,
        computed at run time as the count of ``1..dim - size`` it reaches (no
        arithmetic on the index type); each result element picks, by the clamped
        starts' offset, its source among the few possible ones."""
        import itertools
        shape = instr.operands[0].shape
        nfix = 1 if op == "dynamic-slice" else 2
        (xs, xtypes) = self.operand_elements(instr.operands[:1], ops[:1], op_types[:1])
        if any(t != et for t in xtypes):
            raise _Unsupported(f"{op} changing the element type")
        if op == "dynamic-slice":
            sizes = tuple(int(v) for v in instr.attrs.get("dynamic_slice_sizes"))
            upd = None
        else:
            ushape = instr.operands[1].shape
            upd, utypes = self.operand_elements(instr.operands[1:2], ops[1:2], op_types[1:2])
            if any(t != et for t in utypes) or not isinstance(ushape, ArrayShape):
                raise _Unsupported(f"{op} changing the element type")
            sizes = tuple(ushape.dims)
        starts, stypes = [], []
        for x, t in zip(ops[nfix:], op_types[nfix:]):
            n, ts = _flat(x, t)
            starts += n
            stypes += ts
        dims = tuple(shape.dims)
        if len(starts) != len(dims) or len(sizes) != len(dims) or any(
                t == TOKEN or not t.is_integer for t in stypes) or any(
                s > d or s < 0 for s, d in zip(sizes, dims)):
            raise _Unsupported(f"{op} starts")
        his = [d - s for d, s in zip(dims, sizes)]
        strides = [int(np.prod(dims[k + 1:])) for k in range(len(dims))]
        offset = []
        for x, t, hi, stride in zip(starts, stypes, his, strides):
            if hi == 0:
                continue
            v = self.load(x, t)
            clamped = "0"
            for k in range(1, hi + 1):
                clamped = f"({k} if {v} >= {k} else {clamped})"
            offset.append(f"{self.line(clamped)} * {stride}")
        o = self.line(" + ".join(offset)) if offset else None
        combos = list(itertools.product(*(range(h + 1) for h in his)))

        def pick(candidates):  # [(offset, value)]: the value of the run-time offset
            value = candidates[-1][1]
            for off, v in reversed(candidates[:-1]):
                value = f"({v} if {o} == {off} else {value})"
            return value if len(candidates) == 1 else self.line(value)

        out = []
        if op == "dynamic-slice":
            for j in np.ndindex(*sizes):
                base = sum(a * b for a, b in zip(j, strides))
                out.append(pick([(sum(k * b for k, b in zip(c, strides)),
                                  xs[base + sum(k * b for k, b in zip(c, strides))])
                                 for c in combos]))
            return out
        ustrides = [int(np.prod(sizes[k + 1:])) for k in range(len(sizes))]
        for p in np.ndindex(*dims):
            cands = []
            for c in combos:
                inside = all(k <= q < k + s for k, q, s in zip(c, p, sizes))
                v = upd[sum((q - k) * b for q, k, b in zip(p, c, ustrides))] if inside else \
                    xs[sum(q * b for q, b in zip(p, strides))]
                cands.append((sum(k * b for k, b in zip(c, strides)), v))
            out.append(pick(cands))
        return out

    def vec_elementwise(self, instr, ops, op_types, vec):
        """An elementwise op on small arrays: each element through the scalar path (the
        same instruction on one element); a one-element operand (select's scalar pred,
        clamp's scalar bounds) goes to every element."""
        import dataclasses
        n = vec.n if vec is not None else None
        for t in op_types:
            if isinstance(t, list) or t == TOKEN:
                raise _Unsupported(f"{instr.opcode} of a tuple")
            if isinstance(t, _VecType):
                if n is not None and t.n != n:
                    raise _Unsupported(f"{instr.opcode} sizes")
                n = t.n
        if vec is None or vec.n != n:
            raise _Unsupported(f"{instr.opcode} of a small array")
        inner = dataclasses.replace(instr, shape=ArrayShape(vec.et, ()))
        out = []
        for i in range(n):
            value, vtype = self.instruction(
                inner, [x[i] if isinstance(t, _VecType) else x for x, t in zip(ops, op_types)],
                [t.et if isinstance(t, _VecType) else t for t in op_types])
            if vtype != vec.et:
                raise _Unsupported(f"{instr.opcode} element type")
            out.append(value)
        return tuple(out), vec

    def rng_bit_generator(self, instr, ops, op_types):
        """One element of bits from a ``u64[2]``/``u64[3]`` state (a small array value):
        the CPU's generators of one counter (``gpu/rng.py``, compiled from
        ``evaluator/rng.py``), counter 0 of the state (ThreeFry: ``state[1]``; Philox: the
        128-bit ``(state[1], state[2])``, or ``(state[1], state[0])`` for two words),
        word 0 (64-bit results: words 0 and 1), the low bits as the result type; the new
        state advances the counter by the one counter used (128-bit carry for Philox)."""
        from hloref.evaluator.rng import bit_generator_algorithm, bit_generator_shapes
        from .bitwise_convert import from_bits
        from .rng import philox4x32, threefry2x32
        state_shape, out_shape = bit_generator_shapes(instr.shape)  # the CPU's type errors
        et = _scalar_type(out_shape, rank0=False)
        (st,), (stype,) = ops, op_types
        if not isinstance(stype, _VecType) or stype.et.name != "u64" or (
                state_shape is not None and state_shape.element_type.name != "u64"):
            raise _Unsupported("rng-bit-generator state")
        alg = bit_generator_algorithm(instr.attrs.get("algorithm") or "rng_default", stype.n)
        u64 = self.bind("N", np.uint64)
        m, s32, one = (self.bind("C", np.uint64(v)) for v in (0xFFFFFFFF, 32, 1))
        key = st[0]
        k0, k1 = f"{key} & {m}", f"{key} >> {s32}"
        if alg == "rng_three_fry":
            words = self.line(f"{self.bind('F', threefry2x32)}({st[1]}, {k0}, {k1})")
            new = [key, self.line(f"{u64}({st[1]} + {one})")]
        else:
            lo, hi = st[1], (st[2] if stype.n == 3 else st[0])
            words = self.line(f"{self.bind('F', philox4x32)}({lo}, {hi}, {k0}, {k1})")
            new_lo = self.line(f"{u64}({lo} + {one})")
            new = [key, new_lo]
            if stype.n == 3:
                new.append(self.line(f"({u64}({hi} + {one}) if {new_lo} < {lo} else {hi})"))
        bits = f"({words}[0] | ({words}[1] << {s32}))" if et.bits == 64 else f"{words}[0]"
        put = self.bind("F", from_bits(et))
        value = self.line(f"{put}({bits}, {self.bind('P', type_params(et))})")
        if state_shape is None:
            return value, et
        return [tuple(new), value], [stype, et]

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

    def scalar_dot(self, instr, ops, op_types, et):
        """A dot of one-element operands: their product under the CPU's dot rules
        (``dot_operand``): float results multiply float operands exactly in f64 (other
        operands converted to the result type first) and round once; integer results
        convert the operands and wrap (float operands: the product in f32, converted,
        ``integer_result_in_f32``); pred results AND the operands' truth; complex
        results multiply in c128 parts."""
        if instr.attrs.get("algorithm") is not None:
            raise _Unsupported("dot with an algorithm")
        if len(ops) != 2:
            raise _Unsupported("dot with sparsity metadata")
        return self.product(ops, op_types, et)

    def bitcast_convert(self, x, src, et):
        """The bit pattern of ``x`` as ``et`` (one element: same width only)."""
        from .bitwise_convert import from_bits, to_bits
        if src.bits != et.bits or type_class(src) == "complex" or type_class(et) == "complex":
            raise _Unsupported(f"bitcast-convert {src.name} -> {et.name}")
        get, put = self.bind("F", to_bits(src)), self.bind("F", from_bits(et))
        return self.line(f"{put}({get}({x}, {self.bind('P', type_params(src))}), "
                         f"{self.bind('P', type_params(et))})")

    def complex_instruction(self, instr, op, ops, op_types, et):
        """Complex operands or result: ``complex_elementwise``'s part functions on the
        storage values' parts (a complex storage value is a complex scalar)."""
        src = op_types[0]
        if op in complex_elementwise.BINARY and type_class(src) == "complex":
            fn = self.bind("F", complex_elementwise.BINARY[op])
            a, b = ops
            return self.store_complex(f"{fn}({', '.join(self.parts(a) + self.parts(b))})", et)
        if op in complex_elementwise.UNARY and type_class(src) == "complex":
            fn = self.bind("F", complex_elementwise.UNARY[op])
            return self.store_complex(f"{fn}({', '.join(self.parts(ops[0]))})", et)
        if op in complex_elementwise.TO_REAL and type_class(src) == "complex":
            fn = self.bind("F", complex_elementwise.TO_REAL[op])
            return self.line(self.store(f"{fn}({', '.join(self.parts(ops[0]))})", et))
        if op == "compare":
            direction = str(instr.attrs.get("direction"))
            if direction not in complex_elementwise.COMPARE:
                raise _Unsupported(f"compare {direction} of complex values")
            fn = self.bind("F", complex_elementwise.COMPARE[direction])
            a, b = ops
            return self.line(self.store(f"{fn}({', '.join(self.parts(a) + self.parts(b))})", et))
        if op == "clamp":  # the CPU's min(max(x, lo), hi) in the lexicographic order
            lo, x, hi = ops
            mx = self.bind("F", complex_elementwise.BINARY["maximum"])
            mn = self.bind("F", complex_elementwise.BINARY["minimum"])
            high = self.store_complex(f"{mx}({', '.join(self.parts(x) + self.parts(lo))})", et)
            return self.store_complex(f"{mn}({', '.join(self.parts(high) + self.parts(hi))})",
                                      et)
        if op == "complex":
            a, b = ops
            ta, tb = op_types
            return self.store_complex(f"({self.load(a, ta)}, {self.load(b, tb)})", et)
        if op == "convert":
            return self.complex_convert(ops[0], src, et)
        raise _Unsupported(f"{op} of {src.name}")

    def complex_convert(self, x, src, et):
        """The CPU's rules: complex to complex part by part, complex to real through the
        real part (pred: either part nonzero), real to complex with imaginary part 0."""
        if type_class(src) == "complex" and type_class(et) == "complex":
            return self.store_complex(f"({x}.real, {x}.imag)", et)
        if type_class(src) == "complex":
            if type_class(et) == "pred":
                fn = self.bind("F", _complex_nonzero)
                return self.line(self.store(f"{fn}({x}.real, {x}.imag)", et))
            part = _part_type(src)
            re = self.line(f"{x}.real")
            if part == et:
                return re
            fn, cin, cout = convert_fn(part, et)
            f = self.bind("F", fn)
            return self.line(self.store(f"{f}({self.load(re, part, cin)})", et, cout))
        part = _part_type(et)
        re = x
        if src != part:
            fn, cin, cout = convert_fn(src, part)
            f = self.bind("F", fn)
            re = self.line(self.store(f"{f}({self.load(x, src, cin)})", part, cout))
        return self.store_complex(f"({re}, 0.0)", et)


#: collectives that one device alone computes in a computation (``_Emitter.one_device``)
_ONE_DEVICE = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
               "collective-broadcast")

#: asynchronous wrappers (``_Emitter.async_op``)
_ASYNC = ("async-start", "async-update", "async-done", "copy-start", "copy-done",
          "all-reduce-start", "all-reduce-done", "all-gather-start", "all-gather-done",
          "collective-permute-start", "collective-permute-done")

#: ops whose one-element value is a scalar formula (``_Emitter`` method names)
_SCALAR_FORMS = {"convolution": "convolution", "cholesky": "cholesky",
                 "triangular-solve": "triangular_solve", "fft": "fft",
                 "batch-norm-inference": "batch_norm_inference",
                 "batch-norm-training": "batch_norm_training", "shuffle": "shuffle",
                 "scan": "scan", "select-and-scatter": "select_and_scatter",
                 "scaled-dot": "scaled_dot", "stochastic-convert": "stochastic_convert",
                 "ragged-dot": "ragged_dot", "batch-norm-grad": "batch_norm_grad"}

#: shape ops that, on one-element arrays, pass an operand's element through (which one)
_MOVES = {"reshape": 0, "bitcast": 0, "broadcast": 0, "transpose": 0, "slice": 0,
          "reverse": 0, "dynamic-slice": 0, "dynamic-update-slice": 1, "concatenate": 0}


def _window_covers_element(window, rank: int) -> bool:
    """Whether the window of output 0 of a reduce-window on a one-element operand holds
    the element: in every dimension some window position ``k * dilation - low`` (in
    base-dilated coordinates) is 0 (the element's position)."""
    if window is None:
        return True
    dims = list(window.dims) if hasattr(window, "dims") else list(window)
    for d in dims:
        size = int(getattr(d, "size", 1))
        dil = int(getattr(d, "window_dilation", 1) or 1)
        low = int(getattr(d, "padding_low", 0))
        if not any(k * dil - low == 0 for k in range(size)):
            return False
    return True


def _move_map(instr, op):
    """For a static move of small arrays (``_VEC_MOVES``): the result's elements
    (row-major) as indices into the operands' elements concatenated (each row-major),
    by the CPU's numpy rule of the op (``evaluator/shape_ops.py``) applied to the
    indices; a result of other dimensions than the instruction's (the CPU's error), a
    packed sub-byte layout: unsupported."""
    shapes = [o.shape for o in instr.operands]
    idx, off = [], 0
    for s in shapes:
        idx.append(np.arange(off, off + s.size, dtype=np.int64).reshape(s.dims))
        off += s.size
    x = idx[0]
    attrs = instr.attrs
    dims = tuple(int(d) for d in (attrs.get("dimensions") or ()))
    try:
        if op == "reshape":
            out = x.reshape(instr.shape.dims)
        elif op == "bitcast":
            def physical(a, shape):
                order = tuple(reversed(shape.minor_to_major()))
                return np.transpose(a, order).reshape(-1), order
            for s in (shapes[0], instr.shape):
                if s.layout is not None and 0 < s.layout.element_size_bits < 8:
                    raise _Unsupported("bitcast of a packed layout")
            flat, _ = physical(x, shapes[0])
            order = tuple(reversed(instr.shape.minor_to_major()))
            out = np.transpose(flat.reshape([instr.shape.dims[d] for d in order]),
                               np.argsort(order))
        elif op == "transpose":
            out = np.transpose(x, dims)
        elif op == "reverse":
            out = np.flip(x, axis=dims) if dims else x
        elif op == "slice":
            out = x[tuple(np.s_[d.start:d.limit:d.stride] for d in attrs.get("slice"))]
        elif op == "broadcast":
            if x.ndim != len(dims):
                raise _Unsupported("broadcast rank")
            order = np.argsort(dims, kind="stable")
            x = np.transpose(x, order)
            expanded = [1] * len(instr.shape.dims)
            for k, d in enumerate(dims[i] for i in order):
                expanded[d] = x.shape[k]
            out = np.broadcast_to(x.reshape(expanded), instr.shape.dims)
        else:  # concatenate
            (dim,) = dims
            out = np.concatenate(idx, axis=dim)
    except (ValueError, IndexError, TypeError) as e:  # the CPU's error
        raise _Unsupported(f"{op}: {e}") from None
    if tuple(out.shape) != tuple(instr.shape.dims):
        raise _Unsupported(f"{op} dimensions")
    return [int(i) for i in out.reshape(-1)]


def select_calls(dims) -> int:
    """How many times the CPU's select-and-scatter calls a ``select`` that holds a loop or
    a draw (one it applies element by element) for a one-element operand whose window
    holds the element: the window's positions are visited in row-major order, the
    element (at position ``low`` in each dimension) becomes the choice, and each later
    position (padding: the candidate is a zero of the type) is put to
    ``select(element, 0)``; positions before the element are not (no choice yet)."""
    total, flat = 1, 0
    for d in dims:
        size, low = int(getattr(d, "size", 1)), int(getattr(d, "padding_low", 0))
        total *= size
        flat = flat * size + low
    return total - 1 - flat


def _leaves(value):
    """A value (or type) as a flat list: a tuple's elements, else the one value."""
    if isinstance(value, list):
        if any(isinstance(v, list) for v in value):
            raise _Unsupported("nested tuple")
        return list(value)
    return [value]


def _unflatten(leaves, like):
    return list(leaves) if isinstance(like, list) else leaves[0]


def _flat(value, vtype):
    """``(storage values, element types)`` of a value: a tuple's elements in order (nested
    tuples too), a small array's elements row-major, else the one value."""
    if isinstance(vtype, list):
        names, types = [], []
        for v, t in zip(value, vtype):
            n, ts = _flat(v, t)
            names += n
            types += ts
        return names, types
    if isinstance(vtype, _VecType):
        return list(value), [vtype.et] * vtype.n
    return [value], [vtype]


def _rebuild(names, vtype):
    """The value of type ``vtype`` whose ``_flat`` storage values are ``names``."""
    names = list(names)

    def take(t):
        if isinstance(t, list):
            return [take(x) for x in t]
        if isinstance(t, _VecType):
            out = tuple(names[:t.n])
            del names[:t.n]
            return out
        return names.pop(0)

    return take(vtype)


def _compile(comp, module, limit: int = Limits().max_while_iterations,
             device=(0, 0, 1), mode=None) -> Compiled:
    """``mode``: None, ``"index"`` (rng-get-and-update-state at static sites, the call
    index given) or ``"serial"`` (``gpu/serial.py``)."""
    from .rng import StateChannel
    emitter = _Emitter(module, limit, comp.name, device, serial=mode == "serial")
    params = sorted(comp.parameters, key=lambda p: p.parameter_number)
    ptypes = [_value_type(p.shape) for p in params]
    if any(isinstance(t, list) for t in ptypes):
        raise _Unsupported("tuple parameter")
    if mode == "index":
        emitter.state_sites, emitter.state_delta = _state_sites(comp, module)
    args = [f"v{p.parameter_number}" for p in params]
    root, rtype = emitter.emit(comp, args, ptypes)
    _value_type(comp.root.shape)  # the result: scalars (a tuple of them)
    if isinstance(rtype, list):
        if any(isinstance(t, list) for t in rtype):
            raise _Unsupported("nested tuple result")
        results, ret, tuple_result = list(rtype), "(" + "".join(f"{r}, " for r in root) + ")", True
    else:
        results, ret, tuple_result = [rtype], root, False
    if emitter.state_sites:  # every site counts, dead ones too (the CPU evaluates them)
        args += ["state_k", "state_lo", "state_hi"]
    channels = (StateChannel(),) if emitter.state_count else ()
    args += [c.name for c in channels]
    header = "def f(" + ", ".join(args) + "):"
    source = "\n".join([header] + emitter.lines + [f"    return {ret}"]) + "\n"
    ns = emitter.ns
    exec(compile(source, f"<hlo computation {comp.name}>", "exec"), ns)
    fn = cuda.jit(device=True)(ns["f"])
    compiled = Compiled(fn, ptypes, results, tuple_result, source)
    if emitter.loops:
        compiled.loops = list(emitter.loops)
        compiled.loop_status = ns["LOOP_STATUS"]
    if "RNG_COUNTS" in ns:
        compiled.rng_counts = ns["RNG_COUNTS"]
    if emitter.state_sites:
        compiled.state_delta = emitter.state_delta
    if channels:
        compiled.serial, compiled.channels = True, channels
    return compiled


def result_shapes(shape):
    return list(shape.elements) if isinstance(shape, TupleShape) else [shape]
