"""The planted memory bug of the memory-audit campaign tests (tests/test_memory_campaign.py,
tests/test_ray_campaign.py): a real XLA:CPU assignment corrupted before the audit reads
it (``CampaignOptions.memory_corrupt``)."""

from __future__ import annotations

import os

from hloref.shapes import TupleShape


def plant_output_over_parameter(module, assignment) -> bool:
    """Move the entry root's value (an array) into entry parameter 0's allocation at
    offset 0, when it fits there; True when the assignment was changed."""
    root = module.entry.root
    if root.opcode == "parameter" or isinstance(root.shape, TupleShape):
        return False
    home = param = None
    for alloc in assignment.allocations:
        if alloc.parameter == 0 and alloc.parameter_index == ():
            param = alloc
        for v in alloc.values:
            if v.instruction == root.name and v.index == ():
                home, value = alloc, v
    if home is None or param is None or home is param or value.size > param.size:
        return False
    home.values.remove(value)
    value.offset = 0
    param.values.append(value)
    return True


def memory_findings(out) -> list[str]:
    """The memory findings' directory names in a campaign's ``out``."""
    return sorted(n for n in os.listdir(out) if n.startswith("memory-")
                  and os.path.isfile(os.path.join(out, n, "finding.json")))
