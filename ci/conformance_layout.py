"""Device layouts of multi-device modules (ci/conformance.py): the counts a module's
header declares (``declared_devices``, ``multi_device``), the layout its collectives are
consistent on where a test sets the counts in C++ (``devices_for``, ``layout_consistent``),
and the header rewritten to a layout (``with_devices``)."""

from __future__ import annotations

import re

from hloref.opcodes import CATALOGUE

from conformance_extract import parse_or_none

#: A collective instruction in module text.
COLLECTIVES = re.compile(r"\b(all-gather|all-reduce|reduce-scatter|all-to-all|collective-permute|"
                         r"collective-broadcast)(-start)?\(")
_HEADER_RE = re.compile(r"^\s*HloModule[^\n]*", re.M)
_DEVICES_RE = re.compile(r"\b(?:replica_count|num_partitions)=(\d+)")


def declared_devices(text: str) -> tuple[int, int]:
    module = parse_or_none(text)
    if module is not None:
        return module.replica_count, module.num_partitions
    from hloref.fuzz.oracles.xla import device_counts
    return device_counts(text)


def multi_device(text: str) -> bool:
    """replica_count or num_partitions above 1 in the header (which may span lines)."""
    module = parse_or_none(text)
    if module is not None:
        return module.replica_count > 1 or module.num_partitions > 1
    header = _HEADER_RE.search(text)
    return bool(header) and any(int(n) > 1 for n in _DEVICES_RE.findall(header.group()))


#: Collectives with a ``use_global_device_ids`` field (channel_id alone: replica groups
#: across all partitions) and without one (channel_id: partition ids).
#: Read from the catalogue's attributes: the collectives that take the field, and those
#: with a channel id and device groups (replica groups or source-target pairs) that do
#: not; each also as the ``-start`` of an ``async-start`` that wraps it.
_WITH_GLOBAL_IDS_FIELD = frozenset(
    f"{op}{tail}" for op, info in CATALOGUE.items() if "use_global_device_ids" in info.attributes
    for tail in ("", "-start") if not op.endswith("-start") or not tail)
_WITHOUT_GLOBAL_IDS_FIELD = frozenset(
    f"{op}{tail}" for op, info in CATALOGUE.items()
    if "channel_id" in info.attributes and "use_global_device_ids" not in info.attributes
    and {"replica_groups", "source_target_pairs"} & set(info.attributes)
    for tail in ("", "-start") if not op.endswith("-start") or not tail)
#: At most this many host devices (the xla worker's --xla_force_host_platform_device_count).
MAX_DEVICES = 16


def devices_for(text: str) -> tuple[int, int] | None:
    """``(replica_count, num_partitions)`` for a module whose collectives are written
    for another device layout than its header declares (the test sets the count in
    C++: ``config.set_replica_count(4)``, ``num_partitions``): the layout, of at most
    MAX_DEVICES devices, on which every collective of the module is consistent
    (``layout_consistent``). Preferred: one keeping the header's counts above 1, then
    the fewest devices, then replicas over partitions (partitions over replicas in a
    module that reads partition-id and not replica-id). None when the header's layout
    is consistent, the module does not parse, or no layout is."""
    module = parse_or_none(text)
    if module is None or not COLLECTIVES.search(text):
        return None
    collectives = [i for _, i in module.instructions()
                   if _collective_opcode(i) in _WITH_GLOBAL_IDS_FIELD | _WITHOUT_GLOBAL_IDS_FIELD]
    if not collectives:
        return None
    R0, P0 = module.replica_count, module.num_partitions
    if layout_consistent(collectives, R0, P0):
        return None
    candidates = [(r, p) for r in range(1, MAX_DEVICES + 1) for p in range(1, MAX_DEVICES + 1)
                  if r * p <= MAX_DEVICES and (r, p) != (R0, P0)]
    # replicas before partitions, unless the module reads partition-id and not
    # replica-id (an SPMD test's layout: collective_pipelining_analyzer_test.cc)
    ops = {i.opcode for _, i in module.instructions()}
    spmd = "partition-id" in ops and "replica-id" not in ops
    candidates.sort(key=lambda rp: (not ((R0 == 1 or rp[0] == R0) and (P0 == 1 or rp[1] == P0)),
                                    rp[0] * rp[1], rp[0] if spmd else rp[1]))
    for r, p in candidates:
        if layout_consistent(collectives, r, p):
            return (r, p)
    return None


def _collective_opcode(instr) -> str:
    """The opcode, or the wrapped one of an ``async-start`` (``reduce-scatter-start``)."""
    if instr.opcode == "async-start" and instr.async_wrapped_opcode:
        return instr.async_wrapped_opcode + "-start"
    return instr.opcode


def layout_consistent(collectives, replicas: int, partitions: int) -> bool:
    """Every collective of ``collectives`` is well formed on ``replicas x partitions``
    devices: on every device its participants, as hloref's evaluator reads them
    (``evaluator/collectives.instruction_participants``: XLA's
    ``GetCollectiveOpGroupMode``, empty groups meaning every replica or partition),
    name devices that exist and include the device itself; an all-gather's result is
    its operand times the group size along ``dimensions``, a reduce-scatter's operand
    its result times the group size; an all-to-all's split dimension divides by the
    group size (its tuple form: one operand per participant); a collective-permute's
    pairs name replicas (partitions with channel_id) that exist."""
    from hloref.errors import HloError
    from hloref.evaluator.collectives import (Device, DeviceIO, flag, instruction_participants,
                                              permute_source)
    from hloref.shapes import TupleShape

    def leaves(shape):
        return list(shape.elements) if isinstance(shape, TupleShape) else [shape]

    for d in range(replicas * partitions):
        dev = Device(d // partitions, d % partitions, replicas, partitions, None, DeviceIO())
        for instr in collectives:
            op, attrs = _collective_opcode(instr), instr.attrs
            channel = attrs.get("channel_id")
            try:
                if op.startswith("collective-permute"):
                    pairs = [tuple(int(v) for v in p)
                             for p in attrs.get("source_target_pairs") or ()]
                    permute_source(dev, pairs, channel)
                    continue
                group = instruction_participants(
                    dev, attrs.get("replica_groups"), channel, attrs.get("use_global_device_ids"),
                    has_global_ids_field=op in _WITH_GLOBAL_IDS_FIELD)
                op = op[:-len("-start")] if op.endswith("-start") else op
            except HloError:
                return False
            if d not in group:
                return False
            groups = getattr(attrs.get("replica_groups"), "groups", None) or ()
            kind = (replicas * partitions if channel is not None and flag(
                    attrs.get("use_global_device_ids")) and op in _WITH_GLOBAL_IDS_FIELD else
                    partitions if channel is not None and op not in _WITH_GLOBAL_IDS_FIELD
                    else replicas)
            if any(not 0 <= v < kind for g in groups for v in g):
                return False
            n = len(group)
            dims = tuple(attrs.get("dimensions") or ())
            operands = [o.shape for o in instr.operands]
            if op in ("all-gather", "reduce-scatter"):
                shape = instr.shape
                if _collective_opcode(instr).endswith("-start") and \
                        isinstance(shape, TupleShape) and len(shape.elements) == 2:
                    shape = shape.elements[1]
                results = leaves(shape)
                if len(dims) != 1 or len(results) < len(operands):
                    continue
                (k,) = dims
                for a, b in zip(operands, results):
                    if not (hasattr(a, "dims") and hasattr(b, "dims")) or k >= len(a.dims) \
                            or k >= len(b.dims):
                        continue
                    if op == "reduce-scatter":
                        a, b = b, a
                    if a.dims[k] * n != b.dims[k]:
                        return False
            elif op == "all-to-all":
                if dims:
                    (k,) = dims
                    if any(k < len(getattr(a, "dims", ())) and a.dims[k] % n for a in operands):
                        return False
                elif len(operands) != n:
                    return False
    return True


def with_devices(text: str, replicas: int, partitions: int) -> str:
    """``text`` with its ``HloModule`` header declaring the device counts."""
    def header(m):
        line = re.sub(r",\s*(replica_count|num_partitions)=\d+", "", m.group(0))
        return re.sub(r"^(\s*HloModule\s+[^\s,]+)",
                      rf"\1, replica_count={replicas}, num_partitions={partitions}", line)
    if not _HEADER_RE.search(text):  # a module without a header (XLA names it)
        return f"HloModule m, replica_count={replicas}, num_partitions={partitions}\n" + text
    return _HEADER_RE.sub(header, text, count=1)
