"""Collectives, by simulating every replica and partition of the module.

(Over 600 lines on purpose: the device simulation (hub, devices, group rules, the
device threads) and the collective ops that use it are one concept, and the GPU
backend imports the simulation from here rather than keeping a copy.)

A module with ``replica_count × num_partitions = N > 1`` runs as N interpreters
in N threads (``run_devices``), device ``d = replica * num_partitions +
partition``. A collective instruction hands its value to the ``Hub``, which
waits until every participant of its group has arrived (matching executions by
instruction name and per-device execution count, so collectives inside loops
pair up), then each device computes its own result from the group's values.

Participants follow XLA's ``CollectiveOpGroupMode``: without ``channel_id``,
``replica_groups`` list replica ids (within the device's partition); with
``channel_id`` and ``use_global_device_ids=true`` they list global device ids;
with ``channel_id`` alone they list replica ids across all partitions. Empty
groups mean every device of that kind. Reductions apply the ``to_apply``
computation over the group in group order. Semantics per op follow
operation_semantics §AllReduce, §AllGather, §ReduceScatter, §AllToAll,
§CollectivePermute, §CollectiveBroadcast, §RaggedAllToAll; ``collective-reduce`` follows
upstream XLA's ``collective_reduce_thunk.cc`` (not in operation_semantics yet).

Send/recv match within the module through ``channel_id`` (to the peer named by
the ``_xla_send_recv_source_target_pairs`` frontend attribute, else the same
device); host transfers (``is_host_transfer=true``), ``infeed`` and ``outfeed``
use the queues of ``DeviceIO`` that the caller provides.
"""

from __future__ import annotations

import re
import threading
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from hloref.errors import HloEvalError, HloUnsupportedError
from hloref.shapes import TupleShape
from hloref.values import TOKEN_VALUE

from .numeric import contiguous
from .reduce import is_vectorizable
from .registry import op


@dataclass
class DeviceIO:
    """Queues a caller provides: ``infeed`` values popped in order; ``outfeed`` list
    appended to; host transfers by channel id (``host_recv[c]`` feeds ``recv``,
    ``host_send[c]`` collects ``send``)."""

    infeed: deque = field(default_factory=deque)
    outfeed: list = field(default_factory=list)
    host_recv: dict = field(default_factory=dict)
    host_send: dict = field(default_factory=dict)


class Hub:
    """Rendezvous of the N device threads."""

    def __init__(self, num_devices: int, timeout: float = 60.0):
        self.num_devices = num_devices
        self.timeout = timeout
        self._cond = threading.Condition()
        self._slots: dict = {}
        self._mailboxes: dict = {}
        self.failed: BaseException | None = None

    def exchange(self, key, device: int, participants: list[int], value) -> dict[int, object]:
        """Post ``value`` under ``key``; return every participant's value."""
        with self._cond:
            slot = self._slots.setdefault(key, {})
            slot[device] = value
            self._cond.notify_all()
            ok = self._cond.wait_for(lambda: self.failed is not None or
                                     all(p in slot for p in participants), self.timeout)
            if self.failed is not None:
                raise HloEvalError(f"another device failed: {self.failed}")
            if not ok:
                missing = [p for p in participants if p not in slot]
                raise HloEvalError(f"collective {key[0]} waited {self.timeout:g} s for devices "
                                   f"{missing}: they never reached it (mismatched collectives)")
            return {p: slot[p] for p in participants}

    def post(self, key, value) -> None:
        with self._cond:
            self._mailboxes.setdefault(key, deque()).append(value)
            self._cond.notify_all()

    def take(self, key):
        with self._cond:
            ok = self._cond.wait_for(lambda: self.failed is not None or self._mailboxes.get(key),
                                     self.timeout)
            if self.failed is not None:
                raise HloEvalError(f"another device failed: {self.failed}")
            if not ok:
                raise HloEvalError(f"recv on channel {key[0]} waited {self.timeout:g} s: no send")
            return self._mailboxes[key].popleft()

    def fail(self, exc: BaseException) -> None:
        with self._cond:
            if self.failed is None:
                self.failed = exc
            self._cond.notify_all()


@dataclass
class Device:
    replica: int
    partition: int
    replica_count: int
    num_partitions: int
    hub: Hub | None
    io: DeviceIO
    counters: dict = field(default_factory=dict)

    @property
    def id(self) -> int:
        return self.replica * self.num_partitions + self.partition

    def next_key(self, name: str):
        n = self.counters.get(name, 0)
        self.counters[name] = n + 1
        return (name, n)


def single_device(io: DeviceIO | None = None) -> Device:
    return Device(0, 0, 1, 1, None, io or DeviceIO())


class NotInGroup(HloEvalError):
    """The device is in none of an instruction's replica groups."""


def participants(device: Device, replica_groups, channel_id, use_global_device_ids) -> list[int]:
    """``_participants``, checked against the number of devices the module runs on."""
    group = _participants(device, replica_groups, channel_id, use_global_device_ids)
    n = device.replica_count * device.num_partitions
    if any(not 0 <= d < n for d in group):
        raise HloEvalError(
            f"replica_groups={replica_groups.text if replica_groups is not None else '{}'} "
            f"name device {max(group)}, but the module runs on {n} device(s) "
            f"(replica_count={device.replica_count} x num_partitions={device.num_partitions} "
            f"in the HloModule header)")
    return group


def _participants(device: Device, replica_groups, channel_id, use_global_device_ids) -> list[int]:
    """Global device ids taking part with ``device``, in group order.

    XLA's ``GetCollectiveOpGroupMode``: no channel_id → groups of replica ids (same
    partition); channel_id without ``use_global_device_ids`` → groups of partition
    ids (same replica); channel_id with ``use_global_device_ids=false`` → groups of
    replica ids, all partitions of each; ``=true`` → groups of global device ids."""
    groups = replica_groups.groups if replica_groups is not None else ()
    if groups is None:
        raise HloUnsupportedError("collective", "cpu", f"replica_groups {replica_groups.text} "
                                  "could not be expanded")
    r, p = device.replica, device.partition
    R, P = device.replica_count, device.num_partitions
    if channel_id is not None and use_global_device_ids is True:
        for g in groups or (tuple(range(R * P)),):
            if device.id in g:
                return list(g)
        raise NotInGroup(f"device {device.id} is in no replica group")
    if channel_id is not None and use_global_device_ids is None:
        for g in groups or (tuple(range(P)),):
            if p in g:
                return [r * P + q for q in g]
        raise NotInGroup(f"partition {p} is in no replica group")
    for g in groups or (tuple(range(R)),):
        if r in g:
            if channel_id is None:
                return [rep * P + p for rep in g]
            return [rep * P + part for rep in g for part in range(P)]
    raise NotInGroup(f"replica {r} is in no replica group")


def device_of(ctx) -> Device:
    """The ``Device`` an interpreter context runs as (one single device if none)."""
    dev = getattr(ctx, "device", None)
    if dev is None:
        dev = ctx.device = single_device()
    return dev


def exchange(ctx, name, group, value, channel_id=None):
    """Every participant's ``value`` for this execution of instruction ``name``, by
    device id (only its own on one device). With ``channel_id``, executions pair up by
    channel, not by instruction: as XLA:CPU's rendezvous (its op id is the channel id),
    collectives of one channel in different branches of a conditional meet."""
    dev = device_of(ctx)
    key = dev.next_key(name if channel_id is None else f"channel_id={channel_id}")
    if dev.hub is None or group == [dev.id]:
        return {dev.id: value}
    return dev.hub.exchange(key, dev.id, group, value)


def _combine(to_apply, values: list, module=None):
    """The group's values combined in group order, ``f(f(v0, v1), v2)...``. The reducer
    is a scalar computation: one of elementwise ops (``is_vectorizable``) is applied to
    whole arrays, any other element by element (row-major), pair after pair, so its
    other ops see scalars and its effects (a draw, an outfeed) come once per element."""
    comp = getattr(to_apply, "computation", None)
    if comp is not None and module is not None and not isinstance(values[0], tuple) \
            and not is_vectorizable(comp, module):
        acc = np.asarray(values[0])
        for v in values[1:]:
            v = np.asarray(v)
            out = np.empty_like(acc)
            for index in np.ndindex(*acc.shape):
                out[index] = np.asarray(to_apply(np.asarray(acc[index]), np.asarray(v[index])))
            acc = out
        return acc
    acc = values[0]
    for v in values[1:]:
        acc = to_apply(*acc, *v) if isinstance(acc, tuple) else to_apply(acc, v)
    return acc


@op("replica-id")
def replica_id(*, shape, ctx):
    return np.asarray(device_of(ctx).replica, np.uint32)


@op("partition-id")
def partition_id(*, shape, ctx):
    return np.asarray(device_of(ctx).partition, np.uint32)


def instruction_participants(device: Device, replica_groups, channel_id, use_global_device_ids,
                             *, has_global_ids_field: bool) -> list[int]:
    """``participants`` for an instruction as written. all-reduce, all-gather,
    reduce-scatter and collective-reduce have a ``use_global_device_ids`` field: absent
    is false, so channel_id alone means replicas across all partitions. all-to-all,
    collective-broadcast and ragged-all-to-all have none: channel_id means partitions
    within the replica (XLA's ``GetCollectiveOpGroupMode(const HloInstruction*)``,
    collective_ops_utils.cc)."""
    if has_global_ids_field:
        global_ids = False if use_global_device_ids is None else flag(use_global_device_ids)
    else:
        global_ids = None
    return participants(device, replica_groups, channel_id, global_ids)


def group_of(ctx, replica_groups, channel_id, use_global_device_ids):
    """The participants of an instruction with a ``use_global_device_ids`` field (absent
    is false), in group order."""
    return instruction_participants(device_of(ctx), replica_groups, channel_id,
                                    use_global_device_ids, has_global_ids_field=True)


def group_without_global_ids(ctx, replica_groups, channel_id):
    """The participants of an instruction without a ``use_global_device_ids`` field."""
    return instruction_participants(device_of(ctx), replica_groups, channel_id, None,
                                    has_global_ids_field=False)


def group_or_none(find, *args):
    """``find(*args)`` (``group_of``, ``group_without_global_ids``), or None where the
    device is in no replica group. collective-broadcast's and collective-reduce's groups
    need not cover every device (XLA's verifier does not check them): such a device's
    result is zeros (operation_semantics.md §CollectiveBroadcast; the StableHLO spec's
    collective_broadcast and collective_reduce, "otherwise" zeros)."""
    try:
        return find(*args)
    except NotInGroup:
        return None


@op("all-reduce", "all-reduce-start")
def all_reduce(*xs, shape, to_apply, ctx, instruction_name, replica_groups=None, channel_id=None,
               use_global_device_ids=None, constrain_layout=None):
    group = group_of(ctx, replica_groups, channel_id, use_global_device_ids)
    values = exchange(ctx, instruction_name, group, tuple(xs), channel_id)
    ordered = [values[d] for d in group]
    if len(xs) == 1:
        out = _combine(to_apply, [v[0] for v in ordered], ctx.module)
        return contiguous(np.asarray(out).astype(xs[0].dtype, copy=False))
    comp = getattr(to_apply, "computation", None)
    if comp is not None and len(comp.parameters) == 2:
        # a combined all-reduce (AllReduceCombiner's form): the binary reducer reduces
        # each operand on its own
        return tuple(contiguous(np.asarray(_combine(to_apply, [v[i] for v in ordered], ctx.module))
                                .astype(x.dtype, copy=False)) for i, x in enumerate(xs))
    acc = ordered[0]
    for v in ordered[1:]:
        acc = tuple(np.asarray(a) for a in _as_tuple(to_apply(*acc, *v)))
    return tuple(np.asarray(a).astype(x.dtype, copy=False) for a, x in zip(acc, xs))


def _as_tuple(v):
    return v if isinstance(v, tuple) else (v,)


@op("all-gather", "all-gather-start")
def all_gather(*xs, shape, dimensions, ctx, instruction_name, opcode, replica_groups=None,
               channel_id=None, use_global_device_ids=None, constrain_layout=None):
    (dim,) = tuple(dimensions)
    group = group_of(ctx, replica_groups, channel_id, use_global_device_ids)
    values = exchange(ctx, instruction_name, group, tuple(xs), channel_id)
    outs = tuple(np.concatenate([values[d][i] for d in group], axis=dim) for i in range(len(xs)))
    check_gathered(instruction_name, group, [o.shape for o in outs], shape, opcode)
    result = outs[0] if len(xs) == 1 else outs
    if opcode == "all-gather-start":  # (operands, results)
        return (xs[0] if len(xs) == 1 else tuple(xs), result)
    return result


def check_gathered(name: str, group: list, dims: list, shape, opcode: str) -> None:
    """An all-gather's concatenated results (``dims``, one per operand) must have the
    declared shape (a module written for another device count contradicts its
    collectives)."""
    declared = shape.elements[1] if opcode.endswith("-start") else shape
    leaves = declared.elements if isinstance(declared, TupleShape) else (declared,)
    for got, leaf in zip(dims, leaves):
        if tuple(got) != tuple(leaf.dims):
            raise HloEvalError(
                f"all-gather %{name}: {len(group)} participant(s) give {list(got)}, but the "
                f"declared result is {list(leaf.dims)} (the module names fewer or more "
                f"devices than it was written for)")


def check_scattered(name: str, group: list, size: int, declared: int, dim: int) -> int:
    """The chunk each of a reduce-scatter's participants keeps of dimension ``dim`` (of
    ``size``), which must be the declared result's extent ``declared``."""
    chunk = size // len(group)
    if chunk * len(group) != size or chunk != declared:
        raise HloEvalError(
            f"reduce-scatter %{name}: {len(group)} participant(s) split dimension {dim} of "
            f"size {size}, but the declared result has {declared} (the module names fewer "
            f"or more devices than it was written for)")
    return chunk


@op("all-gather-done", "collective-permute-done")
def collective_done(start, *, shape):
    return start[1]


@op("all-reduce-done")
def all_reduce_done(start, *, shape):
    return start


@op("reduce-scatter")
def reduce_scatter(*xs, shape, dimensions, to_apply, ctx, instruction_name, replica_groups=None,
                   channel_id=None, use_global_device_ids=None, constrain_layout=None):
    (dim,) = tuple(dimensions)
    group = group_of(ctx, replica_groups, channel_id, use_global_device_ids)
    values = exchange(ctx, instruction_name, group, tuple(xs), channel_id)
    me = group.index(device_of(ctx).id)
    outs = []
    for i, x in enumerate(xs):
        reduced = np.asarray(_combine(to_apply, [values[d][i] for d in group], ctx.module))
        declared = (shape.elements[i] if isinstance(shape, TupleShape) else shape).dims
        chunk = check_scattered(instruction_name, group, x.shape[dim], declared[dim], dim)
        index = [slice(None)] * x.ndim
        index[dim] = slice(me * chunk, (me + 1) * chunk)
        outs.append(contiguous(reduced[tuple(index)].astype(x.dtype, copy=False)))
    return outs[0] if len(xs) == 1 else tuple(outs)


@op("all-to-all")
def all_to_all(*xs, shape, ctx, instruction_name, dimensions=None, replica_groups=None,
               channel_id=None, constrain_layout=None):
    group = group_without_global_ids(ctx, replica_groups, channel_id)
    values = exchange(ctx, instruction_name, group, tuple(xs), channel_id)
    me = group.index(device_of(ctx).id)
    if dimensions:
        (dim,) = tuple(dimensions)
        pieces = []
        for d in group:
            (x,) = values[d]
            chunk = x.shape[dim] // len(group)
            index = [slice(None)] * x.ndim
            index[dim] = slice(me * chunk, (me + 1) * chunk)
            pieces.append(x[tuple(index)])
        return contiguous(np.concatenate(pieces, axis=dim))
    # tuple form: operand j of every participant goes to participant j
    return tuple(values[d][me] for d in group)


def _pairs(source_target_pairs) -> list[tuple[int, int]]:
    return [tuple(int(v) for v in p) for p in source_target_pairs]


def permute_source(device: Device, pairs: list[tuple[int, int]], channel_id) -> int | None:
    """The global id of the device whose value a collective-permute delivers to
    ``device`` (None: it receives zeros). The pairs name partition ids within the
    device's replica with ``channel_id``, else replica ids within its partition (XLA's
    ``GetCollectiveOpGroupMode`` without ``use_global_device_ids``; the CPU runtime's
    ``collective_permute_thunk.cc``)."""
    P = device.num_partitions
    by_partition = channel_id is not None
    me, count = (device.partition, P) if by_partition else (device.replica, device.replica_count)
    kind = "partition" if by_partition else "replica"
    for pair in pairs:
        if not all(0 <= v < count for v in pair):
            raise HloEvalError(
                f"source_target_pairs name {kind} {max(pair)}, but the module runs on {count} "
                f"{kind}s (replica_count={device.replica_count} x num_partitions={P} in the "
                f"HloModule header)")
    sources = [s for s, t in pairs if t == me]
    if not sources:
        return None
    return device.replica * P + sources[0] if by_partition else sources[0] * P + device.partition


@op("collective-permute", "collective-permute-start")
def collective_permute(x, *rest, shape, source_target_pairs, ctx, instruction_name, opcode,
                       channel_id=None, slice_sizes=None):
    """Without ``slice_sizes`` every operand is permuted (several operands: a tuple of
    results, XLA's ``InferCollectivePermuteShape``); the in-place form (``slice_sizes``,
    operands input, output, offsets) permutes its input whole."""
    dev = device_of(ctx)
    source = permute_source(dev, _pairs(source_target_pairs), channel_id)
    xs = (x,) if slice_sizes is not None or not rest else (x, *rest)
    # every device reaches the rendezvous with its value; devices outside all pairs too
    everyone = list(range(dev.replica_count * dev.num_partitions))
    values = exchange(ctx, instruction_name, everyone, xs, channel_id)
    results = tuple(v.copy() for v in values[source]) if source is not None else \
        tuple(np.zeros_like(v) for v in xs)
    result = results[0] if len(xs) == 1 else results
    if len(xs) > 1:
        x = xs
    if opcode == "collective-permute-start":
        contexts = [np.zeros((), np.uint32)] * (len(shape.elements) - 2) \
            if isinstance(shape, TupleShape) else []
        return (x, result, *contexts)
    return result


@op("collective-broadcast")
def collective_broadcast(*xs, shape, ctx, instruction_name, replica_groups=None, channel_id=None,
                         has_dynamic_root=None):
    group = group_or_none(group_without_global_ids, ctx, replica_groups, channel_id)
    if group is None:
        return np.zeros_like(xs[0]) if len(xs) == 1 else tuple(np.zeros_like(x) for x in xs)
    values = exchange(ctx, instruction_name, group, tuple(xs), channel_id)
    root = values[group[0]]
    return root[0].copy() if len(xs) == 1 else tuple(v.copy() for v in root)


def dynamic_roots(roots: np.ndarray, count: int) -> np.ndarray:
    """collective-reduce's trailing s32 operand (a host array) as int64 ranks, one per
    reduced operand of ``count``."""
    roots = roots.reshape(-1).astype(np.int64)
    if roots.size < count:
        raise HloEvalError(f"collective-reduce: the root operand holds {roots.size} ranks "
                           f"for {count} reduced operands")
    return roots


def root_rank(values: dict, group: list[int], roots, i: int) -> int:
    """The rank within ``group`` of collective-reduce's root for operand ``i``: 0, or
    with dynamic roots (``roots`` not None) the one rank every participant gives in its
    exchanged ``(operands, roots)``."""
    if roots is None:
        return 0
    ranks = {int(values[d][1][i]) for d in group}
    if len(ranks) != 1:
        raise HloEvalError(f"collective-reduce: the participants {group} give different "
                           f"root ranks {sorted(ranks)} for operand {i}")
    (rank,) = ranks
    if not 0 <= rank < len(group):
        raise HloEvalError(f"collective-reduce dynamic root {rank} at index {i} is out of "
                           f"range [0, {len(group)})")
    return rank


def reduced_operands(xs, has_dynamic_root) -> list:
    """collective-reduce's reduced operands: ``xs`` less the trailing s32 root operand
    when ``has_dynamic_root`` is set."""
    return list(xs[:-1]) if flag(has_dynamic_root) else list(xs)


def reduce_rendezvous(ctx, name, xs, to_host, replica_groups, channel_id,
                      use_global_device_ids, has_dynamic_root):
    """collective-reduce's host side (shared with the GPU): every participant's reduced
    operands, exchanged, as ``(group, operands, at_root)``: ``operands[i]`` holds operand
    ``i`` of each participant in group order and ``at_root[i]`` says whether this device
    is operand ``i``'s root. ``to_host`` reads the dynamic root operand to a host array.
    A device in no replica group meets no one and is no root (``group_or_none``)."""
    data = reduced_operands(xs, has_dynamic_root)
    roots = dynamic_roots(to_host(xs[-1]), len(data)) if flag(has_dynamic_root) else None
    group = group_or_none(group_of, ctx, replica_groups, channel_id, use_global_device_ids)
    if group is None:
        return [], [[] for _ in data], [False] * len(data)
    values = exchange(ctx, name, group, (tuple(data), roots), channel_id)
    me = device_of(ctx).id
    operands = [[values[d][0][i] for d in group] for i in range(len(data))]
    at_root = [group[root_rank(values, group, roots, i)] == me for i in range(len(data))]
    return group, operands, at_root


@op("collective-reduce")
def collective_reduce(*xs, shape, to_apply, ctx, instruction_name, replica_groups=None,
                      channel_id=None, use_global_device_ids=None, has_dynamic_root=None):
    """A reduce to one root (upstream ``collective_reduce_thunk.cc``: ``ncclReduce`` per
    operand). Each operand is reduced with ``to_apply`` over the group, in group order;
    the root, rank 0 of the group or, with ``has_dynamic_root=true``, the rank the
    trailing s32 operand gives per reduced operand, receives the reduction. Upstream
    leaves the other participants' results undefined; hloref gives them zeros, and
    zeros to a device in no replica group (the StableHLO spec's "otherwise")."""
    group, operands, at_root = reduce_rendezvous(
        ctx, instruction_name, xs, np.asarray, replica_groups, channel_id,
        use_global_device_ids, has_dynamic_root)
    outs = []
    for i, x in enumerate(reduced_operands(xs, has_dynamic_root)):
        if at_root[i]:
            reduced = _combine(to_apply, operands[i], ctx.module)
            outs.append(contiguous(np.asarray(reduced).astype(x.dtype, copy=False)))
        else:
            outs.append(np.zeros_like(x))
    return outs[0] if len(outs) == 1 else tuple(outs)


@op("ragged-all-to-all")
def ragged_all_to_all(data, output, input_offsets, send_sizes, output_offsets, recv_sizes, *,
                      shape, ctx, instruction_name, replica_groups=None, channel_id=None):
    """Participant ``i`` sends ``data[input_offsets[j] : +send_sizes[j]]`` (along dim 0)
    to participant ``j``, which places it at ``output_offsets[j]`` (as sent by ``i``)
    of its output."""
    group = group_without_global_ids(ctx, replica_groups, channel_id)
    mine = (data, input_offsets.astype(np.int64), send_sizes.astype(np.int64),
            output_offsets.astype(np.int64))
    values = exchange(ctx, instruction_name, group, mine, channel_id)
    out = output.copy()
    for src, a, b, n in ragged_blocks(ctx, group, values, out.shape[0] if out.ndim else 0):
        out[b:b + n] = src[a:a + n]
    return out


def ragged_blocks(ctx, group: list[int], values: dict, rows: int):
    """The row blocks ragged-all-to-all's participants send this device, from their
    exchanged ``(data, input_offsets, send_sizes, output_offsets)`` (offsets and sizes as
    host int64 arrays): ``(data, first source row, first output row, row count)`` for
    each non-empty one, checked to lie inside the sender's data and this device's
    ``rows``-row output (shared with the GPU)."""
    me = group.index(device_of(ctx).id)
    for d in group:
        src, in_off, sizes, out_off = values[d]
        n = int(sizes[me])
        if n:
            a, b = int(in_off[me]), int(out_off[me])
            if a < 0 or b < 0 or a + n > src.shape[0] or b + n > rows:
                raise HloEvalError(f"ragged-all-to-all: rows [{a}, {a + n}) of a {src.shape[0]}-row "
                                   f"operand to rows [{b}, {b + n}) of a {rows}-row output")
            yield src, a, b, n


# ---------------------------------------------------------------- send / recv, feeds


def peer_pairs(frontend_attributes) -> list[tuple[int, int]] | None:
    """The ``_xla_send_recv_source_target_pairs`` frontend attribute, None if absent."""
    if frontend_attributes is None:
        return None
    m = re.search(r'_xla_send_recv_source_target_pairs="?\{([^"]*)\}"?', str(frontend_attributes))
    if not m:
        return None
    return [tuple(int(v) for v in p.split(",")) for p in re.findall(r"\{([^{}]*)\}", "{" + m.group(1) + "}")]


def flag(value) -> bool:
    """A boolean attribute (typed by the parser); absent is false."""
    return bool(value) if value is not None else False


def send_to_peers(ctx, channel_id, frontend_attributes, copy, mailbox: str = "_mailbox") -> None:
    """A device-to-device send: a fresh ``copy()`` of the data for each peer the
    ``_xla_send_recv_source_target_pairs`` frontend attribute names (the same device
    without it), posted to the hub, or on one device to the context's ``mailbox``."""
    dev = device_of(ctx)
    pairs = peer_pairs(frontend_attributes)
    targets = [t for s, t in pairs if s == dev.id] if pairs else [dev.id]
    for t in targets:
        key = ("channel", int(channel_id or 0), t)
        if dev.hub is None:
            ctx.__dict__.setdefault(mailbox, {}).setdefault(key, deque()).append(copy())
        else:
            dev.hub.post(key, copy())


def receive(ctx, channel_id, mailbox: str = "_mailbox"):
    """What a device-to-device send on ``channel_id`` posted to this device (the first
    not yet received)."""
    dev = device_of(ctx)
    key = ("channel", int(channel_id or 0), dev.id)
    if dev.hub is None:
        box = ctx.__dict__.get(mailbox, {}).get(key)
        if not box:
            raise HloEvalError(f"recv on channel {channel_id}: no matching send ran before it")
        return box.popleft()
    return dev.hub.take(key)


def host_received(dev: Device, channel_id) -> np.ndarray:
    """The next value of the host's queue for ``channel_id`` (``DeviceIO.host_recv``)."""
    queue = dev.io.host_recv.get(int(channel_id or 0))
    if not queue:
        raise HloEvalError(f"recv from the host on channel {channel_id}: the host queue is "
                           f"empty (pass host_recv={{channel: [values]}})")
    return np.asarray(queue.pop(0) if isinstance(queue, list) else queue.popleft())


@op("send")
def send(data, token, *, shape, ctx, channel_id=None, is_host_transfer=None,
         frontend_attributes=None):
    dev = device_of(ctx)
    if flag(is_host_transfer):
        dev.io.host_send.setdefault(int(channel_id or 0), []).append(data.copy())
    else:
        send_to_peers(ctx, channel_id, frontend_attributes, data.copy)
    return (data, np.zeros((), np.uint32), TOKEN_VALUE)


@op("send-done")
def send_done(start, *, shape, channel_id=None, is_host_transfer=None):
    return TOKEN_VALUE


@op("recv")
def recv(token, *, shape, ctx, channel_id=None, is_host_transfer=None, frontend_attributes=None):
    dev = device_of(ctx)
    data_shape = shape.elements[0]
    if flag(is_host_transfer):
        value = host_received(dev, channel_id)
    else:
        value = receive(ctx, channel_id)
    value = value.astype(data_shape.element_type.dtype, copy=False).reshape(data_shape.dims)
    return (value, np.zeros((), np.uint32), TOKEN_VALUE)


@op("recv-done")
def recv_done(start, *, shape, channel_id=None, is_host_transfer=None):
    return (start[0], TOKEN_VALUE)


def infeed_value(ctx, shape) -> np.ndarray:
    """The next value of the device's infeed queue as the data of infeed's ``shape``."""
    io = device_of(ctx).io
    if not io.infeed:
        raise HloEvalError("infeed: the infeed queue is empty (pass infeed=[values])")
    value = io.infeed.popleft()
    data_shape = shape.elements[0]
    from hloref.arguments import coerce_argument
    return coerce_argument(value, data_shape, "infeed value")


@op("infeed")
def infeed(token, *, shape, ctx, infeed_config=None):
    return (infeed_value(ctx, shape), TOKEN_VALUE)


@op("outfeed")
def outfeed(data, token, *, shape, ctx, outfeed_config=None, outfeed_shape=None):
    device_of(ctx).io.outfeed.append(data)
    return TOKEN_VALUE


# ---------------------------------------------------------------- running N devices


_SERIAL_KERNELS = threading.Lock()


def devices_of(module, per_device_args: list) -> tuple[int, int]:
    """``(replica_count, num_partitions)`` of ``module``, checked against the argument
    lists given (one per device)."""
    R, P = module.replica_count, module.num_partitions
    n = R * P
    if len(per_device_args) != n:
        raise HloEvalError(f"the module runs on {n} devices ({R} replicas × {P} partitions): "
                           f"give one argument list per device, got {len(per_device_args)}")
    return R, P


def run_threads(n: int, hub: Hub, work) -> None:
    """``work(d)`` for every device ``d < n``, each in its own thread. A device that
    fails fails the ``hub`` (releasing the others); the first error is raised, a device's
    own before the "another device failed" it caused in the others."""
    errors: list = [None] * n

    def guarded(d):
        try:
            work(d)
        except BaseException as exc:  # noqa: BLE001 - reported below, others released
            errors[d] = exc
            hub.fail(exc)

    from . import narrow
    threads = [threading.Thread(target=guarded, args=(d,), daemon=True) for d in range(n)]
    # Numba's default threading layer cannot run parallel kernels from several Python
    # threads at once: the device threads use the serial kernels.
    with _SERIAL_KERNELS:
        saved, narrow.PARALLEL_THRESHOLD = narrow.PARALLEL_THRESHOLD, None
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            narrow.PARALLEL_THRESHOLD = saved
    first = next((e for e in errors if e is not None and "another device failed" not in str(e)),
                 next((e for e in errors if e is not None), None))
    if first is not None:
        raise first


def run_devices(module, per_device_args: list[list], *, limits=None, io: list | None = None,
                timeout: float = 60.0, interpreter_options=None) -> list:
    """Run the entry computation on every device in its own thread; results in device order.
    ``interpreter_options(d)``: extra ``Interpreter`` keyword arguments for device ``d``
    (the numerical envelope's ``perturb`` hook and ``op_overrides``)."""
    from .interpreter import Interpreter
    R, P = devices_of(module, per_device_args)
    n = R * P
    hub = Hub(n, timeout)
    results: list = [None] * n
    options = [interpreter_options(d) if interpreter_options else {} for d in range(n)]

    def work(d):
        interp = Interpreter(module, limits=limits, **options[d])
        interp.device = Device(d // P, d % P, R, P, hub, io[d] if io else DeviceIO())
        results[d] = interp.run(per_device_args[d])

    run_threads(n, hub, work)
    return results
