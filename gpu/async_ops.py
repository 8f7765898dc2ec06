"""Async pairs on the GPU (mirrors ``evaluator/async_ops.py``): ``async-update``,
``async-done``, ``copy-start``, ``copy-done``. ``async-start`` is prepared by the GPU
interpreter (``GpuInterpreter._prepare``): the wrapped op or called computation runs
on the device like any other, and the start's tuple ``((operands...), result,
context...)`` holds device values (contexts are device zeros)."""

from __future__ import annotations

from hloref.evaluator.async_ops import async_done, async_update, context_values, copy_done

from .device import DArray, empty, to_device
from .registry import gpu_op


# the CPU's: they pick from the start's tuple, whatever holds its arrays
gpu_op("async-update")(async_update)
gpu_op("async-done")(async_done)
gpu_op("copy-done")(copy_done)


@gpu_op("copy-start")
def copy_start(x, *, shape):
    """``(destination, source, context)``: the copy is made here (device to device)."""
    copied = x
    if isinstance(x, DArray):
        copied = empty(x.shape, x.et)
        if x.size:
            copied.data.copy_to_device(x.data)
    contexts = context_values(shape)[0:1] if len(getattr(shape, "elements", ())) > 2 else []
    return (copied, x) + tuple(to_device(c) for c in contexts)
