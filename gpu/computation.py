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
pad, top-k with k = 1, get-dimension-size: ``gpu/computation_one_element.py``), tokens (after-all,
add-dependency), domain (the operand), on a one-device module replica-id, partition-id and the
synchronous collectives (the one participant's value), the asynchronous wrappers
(async-start/update/done of a wrapped op or computation, copy-start/done, and the
dedicated all-reduce, all-gather and collective-permute pairs on one device:
``gpu/computation_control.py``), and the ops whose one-element value is a scalar formula
(``gpu/computation_formulas.py``, each the CPU's arithmetic: convolution, a product
or, where the one tap falls in the padding, the padding zero times rhs; cholesky, a square root;
triangular-solve, ``(1 / a) x b`` (complex: numpy's Smith division and einsum's
product in c128, as the CPU); fft of length 1; batch-norm-inference, -training and
-grad; scaled-dot (a rank-0 scale is 1, as the CPU has it); ragged-dot; stochastic-convert;
shuffle; scan of length 1, one call; select-and-scatter, one scatter call or the init,
a select holding a loop or a draw called where the CPU calls it:
``computation_one_element.py:select_calls``), and
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
dead side effects included, in ``topological_order``: ``cpu_order``), a conditional
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
sort, pad, map, rng...), or an array of more than ``VEC_MAX`` elements), or one
holding an instruction its root does not read that the CPU evaluates for its effects
(``_drops_effects``), or the CPU's own errors (``subtract`` of pred, complex compare
other than EQ/NE...), is not compiled (:func:`compile_computation` returns None): its
op calls it one call at a time through the GPU interpreter instead
(``gpu/calls.py``), on the device, in the CPU's order, with the interpreter's own
effects and errors. XLA:CPU (jaxlib 0.10.2) accepts such modules in its verifier but
aborts compiling a reduce or map whose computation holds rng, a collective, infeed,
outfeed, send or a while (its loop-fusion emitter cannot index them), so no XLA
backend gives their values.

Small array values (2 to ``VEC_MAX`` elements, ``VecType``: a rng-bit-generator state,
or any array the computation builds): see ``gpu/computation_arrays.py``. Runtime
dimension sizes of one-element arrays (``SizedType``): see ``gpu/computation_sizes.py``.

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

The compiler is split by concept: this module compiles a computation and keeps the
loop and rng bookkeeping; ``gpu/computation_values.py`` holds the values' compile-time
types; ``gpu/computation_emitter.py`` the emitter's core and the registry of op forms it
dispatches through (no opcode if-chain; the opcode groups it tests come from the
catalogue, ``hloref/opcodes.py``); the forms, by concept: ``computation_control.py``
(structure, control flow, collectives on one device, async pairs),
``computation_arrays.py`` (small arrays), ``computation_sizes.py`` (runtime sizes),
``computation_elementwise.py`` (elementwise and complex), ``computation_one_element.py``
(ops that call or move, on one element), ``computation_formulas.py`` (the scalar
formulas), ``computation_rng.py`` (random numbers).
"""

from __future__ import annotations

import contextvars

import numpy as np
from numba import cuda

from hloref.errors import HloEvalError
from hloref.evaluator.control import loop_limit_error
from hloref.evaluator.interpreter import Limits
from hloref.evaluator.reduce import is_vectorizable

from .computation_arrays import ArrayForms
from .computation_control import ControlForms
from .computation_elementwise import ElementwiseForms
from .computation_emitter import LOOP_STATUS_TOP, EmitterBase
from .computation_formulas import FormulaForms
from .computation_one_element import OneElementForms
from .computation_rng import RngForms
from .computation_sizes import SizeForms
from .computation_values import Unsupported, root_order, value_type
from .registry import GpuFallback

__all__ = ["Compiled", "compile_computation", "LOOP_RUN", "LoopRun", "LOOP_STATUS_TOP",
           "Emitter"]

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
                name, site = compiled.loops[(code - 1) // 2]
                if isinstance(site, Exception):  # a recorded error site (``error_site``)
                    error = site
                elif code % 2:
                    limit, condition, body = site
                    error = loop_limit_error(limit, name, condition, body)
                else:
                    error = HloEvalError("while loop does not terminate: the body returns its "
                                         "state unchanged and the condition still holds",
                                         instruction=name)
        if error is not None and raise_error:
            raise error


#: the current evaluation's :class:`LoopRun` (set by the GPU interpreter's ``run``)
LOOP_RUN: contextvars.ContextVar = contextvars.ContextVar("hloref_gpu_loop_run", default=None)



class Compiled:
    """A device function ``fn(*parameter storage values) -> result storage value(s)``;
    ``results``: the element types of its results (one per tuple element)."""

    #: whether the CPU applies it to whole arrays (``reduce.is_vectorizable``): reduce and
    #: reduce-window then combine in its pairwise tree order, else in a sequential fold
    vectorizable = True

    #: ``(while instruction name, iteration limit)`` of each loop, in code order, and
    #: ``(instruction name, error)`` of each run-time error site (``EmitterBase.error_site``)
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
                raise Unsupported("an instruction with effects the root does not read")
            compiled = _compile(comp, module, limit, device, mode)
            compiled.vectorizable = is_vectorizable(comp, module)
        except (Unsupported, GpuFallback, HloEvalError):  # no device form: ``gpu/calls.py``
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
    read = {id(i) for i in root_order(comp)}
    drops = any(id(i) in live and id(i) not in read
                and i.opcode not in ("rng", "rng-get-and-update-state")
                for i in comp.instructions) or any(
        _drops_effects(module.computations[n], module, memo)
        for i in comp.instructions for n in i.called_computation_names()
        if n in module.computations)
    memo[comp.name] = drops
    return drops


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
                    raise Unsupported("rng-get-and-update-state without delta")
                sites[(path, id(instr))] = total
                total = (total + int(str(delta))) % 2**128
            elif instr.opcode in ("call", "fusion"):
                (callee,) = instr.called_computation_names()
                walk(module.computations[callee], path + (id(instr),))
            elif any(_holds_state(module.computations[n], module, memo)
                     for n in instr.called_computation_names() if n in module.computations):
                raise Unsupported(f"rng-get-and-update-state under {instr.opcode}")

    walk(comp, ())
    return sites, total


def _static_sites(comp, module) -> bool:
    """Whether every rng-get-and-update-state one call of ``comp`` evaluates has a static
    place in the call (``_state_sites``: none under a loop, a conditional, a nested op)."""
    try:
        _state_sites(comp, module)
    except Unsupported:
        return False
    return True



class Emitter(ControlForms, ArrayForms, SizeForms, ElementwiseForms, OneElementForms,
              FormulaForms, RngForms, EmitterBase):
    """The emitter with every op form (``gpu/computation_emitter.py``)."""


def _compile(comp, module, limit: int = Limits().max_while_iterations,
             device=(0, 0, 1), mode=None) -> Compiled:
    """``mode``: None, ``"index"`` (rng-get-and-update-state at static sites, the call
    index given) or ``"serial"`` (``gpu/serial.py``)."""
    from .rng import StateChannel
    emitter = Emitter(module, limit, comp.name, device, serial=mode == "serial")
    params = sorted(comp.parameters, key=lambda p: p.parameter_number)
    ptypes = [value_type(p.shape) for p in params]
    if any(isinstance(t, list) for t in ptypes):
        raise Unsupported("tuple parameter")
    if mode == "index":
        emitter.state_sites, emitter.state_delta = _state_sites(comp, module)
    args = [f"v{p.parameter_number}" for p in params]
    root, rtype = emitter.emit(comp, args, ptypes)
    value_type(comp.root.shape)  # the result: scalars (a tuple of them)
    if isinstance(rtype, list):
        if any(isinstance(t, list) for t in rtype):
            raise Unsupported("nested tuple result")
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

