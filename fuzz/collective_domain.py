"""Collectives outside their domain: replica groups or source-target pairs that name a
device the run does not have, or name one twice.

The StableHLO spec requires every id of ``replica_groups`` to lie below the count its
group mode takes (all_reduce, all_gather, reduce_scatter (C3)/(C4)/(C5): ``0 <=
replica_groups < size(replica_groups)``; all_to_all (C7); collective_broadcast and
collective_reduce (C2)), each id once (``is_unique``), and ``0 <= source_target_pairs
< N`` for collective_permute (C4). A program breaking them is outside the op's domain:
the text gives it no value. XLA's verifier (``CheckReplicaGroups``,
``CheckDuplicatedSourceOrTarget``) lets them through where the count is 1 (``replica_count
== 1 || n == replica_count``), and does not look at collective-broadcast's groups at all;
XLA:CPU (jaxlib 0.10.2) then returns the operand for an all-reduce with
``replica_groups={{0,1}}`` on one device, zeros for a collective-permute with
``source_target_pairs={{0,1}}``, and fails at run time (``RET_CHECK ... replica_id <
replica_count``) for all-gather, all-to-all and reduce-scatter. hloref stops
(``evaluator/collectives.py:participants``, ``permute_source``).

What the spec does define is not here: a collective-permute target without a source and
a device in no group of collective-broadcast or collective-reduce receive zeros.
"""

from __future__ import annotations

from hloref.op_properties import opcodes_with

__all__ = ["outside_domain"]

#: collectives with a ``use_global_device_ids`` field (``evaluator/collectives.py:group_of``)
_GLOBAL_IDS_FIELD = opcodes_with("global-device-ids-mode") | {"collective-reduce"}
#: collectives whose groups XLA's verifier never checks (an id twice is not refused)
_UNCHECKED = frozenset({"collective-broadcast", "collective-reduce"})


def _id_space(instr, replicas: int, partitions: int) -> tuple[str, int]:
    """The kind of id ``instr``'s groups or pairs list and how many the run has (XLA's
    ``GetCollectiveOpGroupMode``, as ``evaluator/collectives.py:_participants`` reads it)."""
    a = instr.attrs
    channel = a.get("channel_id") is not None
    if instr.opcode.startswith("collective-permute"):
        return ("partition", partitions) if channel else ("replica", replicas)
    if not channel:
        return "replica", replicas
    if instr.opcode in _GLOBAL_IDS_FIELD:
        if a.get("use_global_device_ids") is True:
            return "device", replicas * partitions
        return "replica", replicas
    return "partition", partitions


def _header(replicas: int, partitions: int) -> str:
    return f"replica_count={replicas} x num_partitions={partitions}"


def outside_domain(module) -> list[tuple[str, str]]:
    """``(instruction name, why)`` for every collective of ``module`` whose
    ``replica_groups`` or ``source_target_pairs`` name an id at or past the count of its
    kind in the module header (replicas, partitions, or both multiplied), or (the groups
    XLA's verifier does not check) an id twice."""
    if module is None:
        return []
    R, P = module.replica_count, module.num_partitions
    out = []
    for comp in module.computations.values():
        for instr in comp.instructions:
            kind, count = _id_space(instr, R, P)
            pairs = instr.attrs.get("source_target_pairs")
            groups = getattr(instr.attrs.get("replica_groups"), "groups", None)
            if instr.opcode.startswith("collective-permute") and pairs is not None:
                ids = [int(v) for p in pairs for v in p]
                where = "source_target_pairs"
            elif groups:
                ids = [int(v) for g in groups for v in g]
                where = f"replica_groups={instr.attrs['replica_groups'].text}"
            else:
                continue
            beyond = [i for i in ids if not 0 <= i < count]
            if beyond:
                out.append((instr.name, f"%{instr.name} ({instr.opcode}): {where} names "
                            f"{kind} {max(beyond, key=abs)}, but the module runs on {count} "
                            f"{kind}(s) ({_header(R, P)})"))
            elif instr.opcode in _UNCHECKED and len(set(ids)) < len(ids):
                twice = sorted({i for i in ids if ids.count(i) > 1})
                out.append((instr.name, f"%{instr.name} ({instr.opcode}): {where} names "
                            f"{kind} {twice[0]} more than once"))
    return out
