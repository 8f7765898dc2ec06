"""Collectives on the GPU (mirrors ``evaluator/collectives.py``, whose docstring fixes the
semantics: participants, group order, per-op results).

A module with ``replica_count x num_partitions = N > 1`` runs as N GPU interpreters in N
threads (``run_devices``), one simulated device each, sharing the one GPU: every
buffer stays on the device. A collective hands its device arrays to the CPU backend's
``Hub`` (the rendezvous matches executions by instruction name and count, so
collectives in loops pair up); each device then builds its own result from the
group's device arrays with device kernels: block copies along a dimension
(all-gather, reduce-scatter, all-to-all), the reduction computation compiled for the
device (``gpu/computation.py``, applied pairwise in group order as the CPU's
``_combine``), copies or zeros (collective-permute, collective-broadcast,
collective-reduce), row blocks (ragged-all-to-all). send/recv post device copies to the
hub's mailboxes; host transfers, infeed and outfeed move values between the device and
the ``DeviceIO`` queues. CPU fallbacks inside a multi-device run (variadic reductions,
reducers without GPU element functions) share the device's ``Device`` and so its
rendezvous. ``replica-id`` and ``partition-id`` are the device's (0 on one device).
Small metadata operands (ragged offsets and sizes, dynamic roots) are read to the host.
"""

from __future__ import annotations

import threading

import numpy as np
from numba import cuda

from hloref.errors import HloEvalError
from hloref.evaluator.collectives import (Device, DeviceIO, Hub, all_reduce_done,
                                          check_gathered, check_scattered, collective_done,
                                          device_of, devices_of, exchange, flag, group_of,
                                          group_or_none, group_without_global_ids,
                                          host_received, infeed_value, permute_source, ragged_blocks,
                                          receive, recv_done, reduce_rendezvous,
                                          reduced_operands, run_threads, send_done,
                                          send_to_peers)
from hloref.shapes import ArrayShape, TupleShape
from hloref.values import TOKEN_VALUE

from .device import DArray, device_copy, empty, to_device
from .elementwise import launch, zeros
from .registry import gpu_op


__all__ = ["run_devices"]


@gpu_op("replica-id")
def replica_id(*, shape, ctx):
    return to_device(np.asarray(device_of(ctx).replica, np.uint32))


@gpu_op("partition-id")
def partition_id(*, shape, ctx):
    return to_device(np.asarray(device_of(ctx).partition, np.uint32))


# ----------------------------------------------------------------- device helpers

@cuda.jit
def _copy_block(src, out, n, count, inner, src_len, src_off, out_len, out_off):
    """``out[o, out_off + c, r] = src[o, src_off + c, r]`` for ``c < count``."""
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < n:
        r = i % inner
        c = (i // inner) % count
        o = i // (inner * count)
        out[(o * out_len + out_off + c) * inner + r] = src[(o * src_len + src_off + c) * inner + r]
        i += step


def _split(dims, dim):
    outer = int(np.prod(dims[:dim], dtype=np.int64))
    inner = int(np.prod(dims[dim + 1:], dtype=np.int64))
    return outer, max(inner, 1)


def _block(src: DArray, out: DArray, dim: int, src_off: int, out_off: int, count: int):
    outer, inner = _split(src.shape, dim)
    n = outer * count * inner
    launch(_copy_block, n, src.data, out.data, n, max(count, 1), inner, src.shape[dim], src_off,
           out.shape[dim], out_off)


def _reducer(ctx, to_apply, xs):
    """The combining function ``(values) -> DArray`` on the device for each operand of
    ``xs``. On one device every group has one participant and the CPU's ``_combine``
    never calls the computation (whatever it holds); on several it applies the scalar
    reducer pair after pair, element by element (to whole arrays when it is made of
    elementwise ops, the same values), as a per-element ``map`` does here (compiled, or
    one call at a time through the GPU interpreter, ``gpu/calls.py``), in the same
    order, effects included."""
    from .windows import map_
    dev = device_of(ctx)
    if dev.replica_count * dev.num_partitions == 1:
        return lambda values: device_copy(values[0])

    def combine(values):
        acc = values[0]
        for v in values[1:]:
            acc = map_(acc, v, shape=ArrayShape(acc.et, tuple(acc.shape)), to_apply=to_apply,
                       ctx=ctx)
        return acc if len(values) > 1 else device_copy(acc)

    return combine


# ----------------------------------------------------------------- collectives

@gpu_op("all-reduce", "all-reduce-start")
def all_reduce(*xs, shape, to_apply, ctx, instruction_name, replica_groups=None, channel_id=None,
               use_global_device_ids=None):
    # one operand, or a combined all-reduce (a binary reducer for each operand; a
    # variadic reducer falls back in _reducer)
    combine = _reducer(ctx, to_apply, xs)
    group = group_of(ctx, replica_groups, channel_id, use_global_device_ids)
    values = exchange(ctx, instruction_name, group, tuple(xs), channel_id)
    outs = tuple(combine([values[d][i] for d in group]) for i in range(len(xs)))
    return outs[0] if len(xs) == 1 else outs


# the CPU's: they pick from their operand, whatever holds its arrays
gpu_op("all-reduce-done")(all_reduce_done)
gpu_op("all-gather-done", "collective-permute-done")(collective_done)


@gpu_op("all-gather", "all-gather-start")
def all_gather(*xs, shape, dimensions, ctx, instruction_name, opcode, replica_groups=None,
               channel_id=None, use_global_device_ids=None):
    (dim,) = tuple(dimensions)
    group = group_of(ctx, replica_groups, channel_id, use_global_device_ids)
    values = exchange(ctx, instruction_name, group, tuple(xs), channel_id)
    gathered = []
    for i, x in enumerate(xs):
        dims = list(x.shape)
        dims[dim] = sum(values[d][i].shape[dim] for d in group)
        gathered.append(tuple(dims))
    check_gathered(instruction_name, group, gathered, shape, opcode)
    outs = []
    for i, x in enumerate(xs):
        out = empty(gathered[i], x.et)
        offset = 0
        for d in group:
            part = values[d][i]
            _block(part, out, dim, 0, offset, part.shape[dim])
            offset += part.shape[dim]
        outs.append(out)
    result = outs[0] if len(xs) == 1 else tuple(outs)
    if opcode == "all-gather-start":  # (operands, results)
        return (xs[0] if len(xs) == 1 else tuple(xs), result)
    return result


@gpu_op("reduce-scatter")
def reduce_scatter(*xs, shape, dimensions, to_apply, ctx, instruction_name, replica_groups=None,
                   channel_id=None, use_global_device_ids=None):
    """The CPU's ``reduce_scatter``: each operand reduced over the group in group order,
    this device's block of it along ``dimensions`` kept (several operands: a tuple)."""
    (dim,) = tuple(dimensions)
    combine = _reducer(ctx, to_apply, xs)
    group = group_of(ctx, replica_groups, channel_id, use_global_device_ids)
    values = exchange(ctx, instruction_name, group, tuple(xs), channel_id)
    me = group.index(device_of(ctx).id)
    outs = []
    for i, x in enumerate(xs):
        reduced = combine([values[d][i] for d in group])
        declared = (shape.elements[i] if isinstance(shape, TupleShape) else shape).dims
        chunk = check_scattered(instruction_name, group, x.shape[dim], declared[dim], dim)
        dims = list(x.shape)
        dims[dim] = chunk
        out = empty(tuple(dims), x.et)
        _block(reduced, out, dim, me * chunk, 0, chunk)
        outs.append(out)
    return outs[0] if len(xs) == 1 else tuple(outs)


@gpu_op("all-to-all")
def all_to_all(*xs, shape, ctx, instruction_name, dimensions=None, replica_groups=None,
               channel_id=None):
    group = group_without_global_ids(ctx, replica_groups, channel_id)
    values = exchange(ctx, instruction_name, group, tuple(xs), channel_id)
    me = group.index(device_of(ctx).id)
    if dimensions:
        (dim,) = tuple(dimensions)
        (x,) = xs
        chunk = x.shape[dim] // len(group)
        dims = list(x.shape)
        dims[dim] = chunk * len(group)
        out = empty(tuple(dims), x.et)
        for k, d in enumerate(group):
            _block(values[d][0], out, dim, me * chunk, k * chunk, chunk)
        return out
    # tuple form: operand j of every participant goes to participant j
    return tuple(values[d][me] for d in group)


@gpu_op("collective-permute", "collective-permute-start")
def collective_permute(x, *rest, shape, source_target_pairs, ctx, instruction_name, opcode,
                       channel_id=None, slice_sizes=None):
    """The CPU's ``collective_permute``: every operand permuted (several: a tuple); the
    in-place form (``slice_sizes``; operands input, output, offsets) permutes its input
    whole."""
    dev = device_of(ctx)
    pairs = [tuple(int(v) for v in p) for p in source_target_pairs]
    source = permute_source(dev, pairs, channel_id)
    xs = (x,) if slice_sizes is not None or not rest else (x, *rest)
    # every device reaches the rendezvous with its value; devices outside all pairs too
    everyone = list(range(dev.replica_count * dev.num_partitions))
    values = exchange(ctx, instruction_name, everyone, xs, channel_id)
    results = tuple(device_copy(v) for v in values[source]) if source is not None else \
        tuple(zeros(v.shape, v.et) for v in xs)
    result = results[0] if len(xs) == 1 else results
    if len(xs) > 1:
        x = xs
    if opcode == "collective-permute-start":
        contexts = [to_device(np.zeros((), np.uint32))
                    for _ in range(len(shape.elements) - 2)] \
            if isinstance(shape, TupleShape) else []
        return (x, result, *contexts)
    return result


@gpu_op("collective-broadcast")
def collective_broadcast(*xs, shape, ctx, instruction_name, replica_groups=None, channel_id=None):
    group = group_or_none(group_without_global_ids, ctx, replica_groups, channel_id)
    if group is None:  # in no replica group: zeros (the CPU's ``collective_broadcast``)
        return zeros(xs[0].shape, xs[0].et) if len(xs) == 1 else \
            tuple(zeros(x.shape, x.et) for x in xs)
    values = exchange(ctx, instruction_name, group, tuple(xs), channel_id)
    root = values[group[0]]
    return device_copy(root[0]) if len(xs) == 1 else tuple(device_copy(v) for v in root)


@gpu_op("collective-reduce")
def collective_reduce(*xs, shape, to_apply, ctx, instruction_name, replica_groups=None,
                      channel_id=None, use_global_device_ids=None, has_dynamic_root=None):
    """The CPU's ``collective_reduce`` (its docstring fixes the semantics) on device
    buffers: each operand reduced over the group in group order at the root, zeros
    elsewhere. The dynamic root ranks (a small s32 operand) are read to the host."""
    data = reduced_operands(xs, has_dynamic_root)
    combine = _reducer(ctx, to_apply, data)
    _, operands, at_root = reduce_rendezvous(
        ctx, instruction_name, xs, lambda r: r.to_host(), replica_groups, channel_id,
        use_global_device_ids, has_dynamic_root)
    outs = []
    for i, x in enumerate(data):
        if at_root[i]:
            outs.append(combine(operands[i]))
        else:
            outs.append(zeros(x.shape, x.et))
    return outs[0] if len(outs) == 1 else tuple(outs)


@gpu_op("ragged-all-to-all")
def ragged_all_to_all(data, output, input_offsets, send_sizes, output_offsets, recv_sizes, *,
                      shape, ctx, instruction_name, replica_groups=None, channel_id=None):
    """Participant ``i`` sends rows ``data[input_offsets[j] : +send_sizes[j]]`` to
    participant ``j``, which places them at ``output_offsets[j]`` (as sent by ``i``) of
    a copy of its ``output``: block copies along dimension 0. The offsets and sizes
    (small integer operands) are read to the host."""
    group = group_without_global_ids(ctx, replica_groups, channel_id)
    mine = (data, input_offsets.to_host().astype(np.int64), send_sizes.to_host().astype(np.int64),
            output_offsets.to_host().astype(np.int64))
    values = exchange(ctx, instruction_name, group, mine, channel_id)
    out = device_copy(output)
    for src, a, b, n in ragged_blocks(ctx, group, values, output.shape[0] if output.ndim else 0):
        _block(src, out, 0, a, b, n)
    return out


# ----------------------------------------------------------------- send / recv, feeds

def _u32_zero():
    return to_device(np.zeros((), np.uint32))


def _loops_settled() -> None:
    """Raise a loop error a computation compiled for the device recorded in an earlier op
    (``gpu/computation.py``: read once at the end of the evaluation for pure ops): the
    CPU stops at that op, so an effect the host sees (a queue read or written) must not
    happen after it."""
    from .computation import LOOP_RUN
    run = LOOP_RUN.get()
    if run is not None and run.used:
        run.check()


@gpu_op("send")
def send(data, token, *, shape, ctx, channel_id=None, is_host_transfer=None,
         frontend_attributes=None):
    """To the host: a host copy in the device's queue; to devices: a device copy posted
    to each peer's mailbox (the same device on one device)."""
    dev = device_of(ctx)
    if flag(is_host_transfer):
        _loops_settled()
        dev.io.host_send.setdefault(int(channel_id or 0), []).append(data.to_host())
    else:
        send_to_peers(ctx, channel_id, frontend_attributes, lambda: device_copy(data), "mailbox")
    return (data, _u32_zero(), TOKEN_VALUE)


gpu_op("send-done")(send_done)  # the CPU's (a token)


@gpu_op("recv")
def recv(token, *, shape, ctx, channel_id=None, is_host_transfer=None, frontend_attributes=None):
    dev = device_of(ctx)
    data_shape = shape.elements[0]
    if flag(is_host_transfer):
        _loops_settled()
        value = host_received(dev, channel_id)
        value = to_device(value.astype(data_shape.element_type.dtype, copy=False)
                          .reshape(data_shape.dims))
    else:
        value = receive(ctx, channel_id, "mailbox")
        if value.et != data_shape.element_type:  # the CPU's numpy conversion, on the host
            value = to_device(value.to_host().astype(data_shape.element_type.dtype))
        value = value.reshape(tuple(data_shape.dims)) if value.size == int(
            np.prod(data_shape.dims, dtype=np.int64)) else to_device(
            value.to_host().reshape(data_shape.dims))  # the CPU's reshape error
    return (value, _u32_zero(), TOKEN_VALUE)


gpu_op("recv-done")(recv_done)  # the CPU's (the received data, a token)


@gpu_op("infeed")
def infeed(token, *, shape, ctx, infeed_config=None):
    """The next host value of the device's infeed queue, sent to the device."""
    _loops_settled()
    return (to_device(infeed_value(ctx, shape)), TOKEN_VALUE)


@gpu_op("outfeed")
def outfeed(data, token, *, shape, ctx, outfeed_config=None, outfeed_shape=None):
    """A host copy of ``data`` appended to the device's outfeed list."""
    from .device import to_host
    _loops_settled()
    device_of(ctx).io.outfeed.append(to_host(data))
    return TOKEN_VALUE


# ----------------------------------------------------------------- running N devices

class _TurnHub(Hub):
    """The CPU's rendezvous, with one device thread running at a time: a thread holds
    ``turn`` while it runs and gives it up while it waits for the others. (numba's CUDA
    simulator cannot run kernels launched from several host threads at once; on a GPU
    the devices share one GPU anyway.)"""

    def __init__(self, num_devices: int, timeout: float):
        super().__init__(num_devices, timeout)
        self.turn = threading.Lock()

    def exchange(self, key, device, participants, value):
        self.turn.release()
        try:
            return super().exchange(key, device, participants, value)
        finally:
            self.turn.acquire()

    def take(self, key):
        self.turn.release()
        try:
            return super().take(key)
        finally:
            self.turn.acquire()


def run_devices(module, per_device_args: list[list], *, limits=None, io: list | None = None,
                fallback: bool = True, timeout: float = 60.0, reports: list | None = None) -> list:
    """Run the entry computation on N simulated GPU devices, each in its own thread
    with its own ``GpuInterpreter``; host results in device order. ``reports``: a list
    that receives each device's ``FallbackReport``."""
    from .device import to_host
    from .interpreter import GpuInterpreter
    R, P = devices_of(module, per_device_args)
    n = R * P
    hub = _TurnHub(n, timeout)
    results: list = [None] * n
    interps = [GpuInterpreter(module, limits=limits, fallback=fallback) for _ in range(n)]
    for d, interp in enumerate(interps):
        interp.attach_device(Device(d // P, d % P, R, P, hub, io[d] if io else DeviceIO()))
    if reports is not None:
        reports.extend(i.report for i in interps)

    def work(d):
        hub.turn.acquire()
        try:
            args = [to_device(v) for v in per_device_args[d]]
            results[d] = to_host(interps[d].run(args))
        finally:
            hub.turn.release()

    # the CPU's device threads (CPU fallbacks run the narrow-float kernels serially)
    run_threads(n, hub, work)
    return results
