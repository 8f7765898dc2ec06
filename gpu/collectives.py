"""Collectives on the GPU (mirrors ``evaluator/collectives.py``).

The GPU backend evaluates single-device modules only (``hloref.evaluate`` refuses a
module with replica_count x num_partitions > 1 on it), so the device is replica 0 of
partition 0: ``replica-id`` and ``partition-id`` are a device zero. The collectives
themselves (all-reduce, all-gather, ...) still run their CPU versions: simulating one
device per replica on the GPU needs a multi-device GPU interpreter first.
"""

from __future__ import annotations

import numpy as np

from .device import to_device
from .registry import gpu_op

OP_FAMILY = True


@gpu_op("replica-id")
def replica_id(*, shape):
    return to_device(np.asarray(0, np.uint32))


@gpu_op("partition-id")
def partition_id(*, shape):
    return to_device(np.asarray(0, np.uint32))
