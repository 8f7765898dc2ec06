"""XLA's ``BufferAssignmentProto`` as ``memory_analysis()`` serializes it
(``CompiledMemoryStats.serialized_buffer_assignment_proto``), read without protobuf, and
XLA's ``ComputePeakMemory`` replayed on it.

Where ``peak_memory_in_bytes`` comes from on XLA:CPU (read in openxla/xla):
``PjRtCpuExecutable::GetCompiledMemoryStats`` (``xla/pjrt/cpu/cpu_client.cc``) sets it to
``ComputePeakMemory(buffer_assignment.ToProto())`` (``xla/service/buffer_assignment.cc``):
the largest logical buffer of every entry-parameter, constant and maybe-live-out
allocation, plus a replay of the proto's ``heap_simulator_traces`` (ALLOC, FREE,
SHARE_WITH). The temporaries are in those traces only. jaxlib 0.10.2's XLA:CPU proto
carries none (measured: field 4 is absent on every program), so its peak is the static
part alone: arguments + outputs + constants, without temporaries.
``BufferAssignment::FromProto``, which the AOT load path (``CpuAotCompilationResult::
LoadExecutable``) uses to rebuild the executable's assignment, does not restore heap
traces: a likely reason, not verified against jaxlib's build.

Field numbers are ``xla/service/hlo.proto``'s (checked against TensorFlow's
``hlo_pb2``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ProtoPeak", "peak_from_proto", "proto_fields"]

_ALLOC, _FREE, _SHARE_WITH = 0, 1, 2


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, i


def proto_fields(data: bytes) -> list[tuple[int, object]]:
    """``[(field number, value)]`` of one serialized message: ints for varints, bytes
    for length-delimited fields (fixed-width ones as bytes too)."""
    out, i = [], 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 2:
            n, i = _varint(data, i)
            value, i = data[i:i + n], i + n
        elif wire in (1, 5):
            n = 8 if wire == 1 else 4
            value, i = data[i:i + n], i + n
        else:
            raise ValueError(f"unsupported protobuf wire type {wire} at byte {i}")
        out.append((number, value))
    return out


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


@dataclass
class ProtoPeak:
    #: heap-simulator traces in the proto (what ComputePeakMemory replays)
    heap_simulator_traces: int
    #: the largest logical buffer of every parameter, constant and live-out allocation
    static_bytes: int
    #: ComputePeakMemory's answer: the static bytes plus the traces' highest point
    peak: int


def peak_from_proto(data: bytes) -> ProtoPeak:
    """``ComputePeakMemory`` (``xla/service/buffer_assignment.cc``) on a serialized
    ``BufferAssignmentProto``."""
    sizes: dict[int, int] = {}
    traces = []
    static = 0
    refs: dict[int, int] = {}
    for number, value in proto_fields(data):
        if number == 1:  # logical_buffers: id 1, size 2
            f = dict(proto_fields(value))
            sizes[_signed(f.get(1, 0))] = _signed(f.get(2, 0))
        elif number == 4:
            traces.append(value)
    for number, value in proto_fields(data):
        if number != 3:  # buffer_allocations
            continue
        fields = proto_fields(value)
        flags = {n: v for n, v in fields if n in (3, 5, 7, 12)}
        if flags.get(3) or not (flags.get(5) or flags.get(7) or flags.get(12)):
            continue
        assigned = [_signed(dict(proto_fields(v)).get(1, 0)) for n, v in fields if n == 9]
        known = [b for b in assigned if b in sizes]
        if known:
            largest = max(known, key=lambda b: sizes[b])
            refs[largest] = refs.get(largest, 0) + 1
            static += sizes[largest]
    memory = peak = static
    under: dict[int, int] = {}
    for trace in traces:
        for number, event in proto_fields(trace):
            if number != 1:
                continue
            e = dict(proto_fields(event))
            kind, buf = e.get(1, 0), _signed(e.get(2, 0))
            if kind == _ALLOC:
                refs[buf] = refs.get(buf, 0) + 1
                memory += sizes.get(buf, 0) if refs[buf] == 1 else 0
            elif kind == _FREE:
                root = buf
                while root in under:
                    root = under[root]
                under.pop(buf, None)
                refs[root] = refs.get(root, 0) - 1
                memory -= sizes.get(root, 0) if refs[root] == 0 else 0
            elif kind == _SHARE_WITH:
                root = _signed(e.get(5, 0))
                while root in under:
                    root = under[root]
                under[buf] = root
                refs[root] = refs.get(root, 0) + 1
                memory += sizes.get(root, 0) if refs[root] == 1 else 0
            peak = max(peak, memory)
    return ProtoPeak(len(traces), static, peak)
