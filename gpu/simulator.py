"""Running under numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``): what this backend
changes there.

The simulator runs a block's threads as Python threads while the launching thread polls
them in a busy loop (``numba.cuda.simulator.kernel.BlockManager.run``: ``is_alive`` of
every live thread, again and again). Every device-function call in a thread takes a
per-module lock (``swapped_cuda_module``); once threads wait on that lock or on the GIL,
the poller keeps the GIL for a whole switch interval (5 ms), so a kernel that calls many
device functions per element (a computation with ``rng`` in a ``map``: Philox, loads,
stores) can fall into a convoy of one switch interval per call. Measured (2 cores): a
2,048-element map of ``x + rng(2, 5)`` took 40-85 s instead of 0.4 s, at random, and
``tests/gpu/test_gpu_computation_rng.py`` 435 s instead of 8.5 s.

:func:`poll_politely` makes the poller yield the GIL at each poll (``time.sleep(0)``
releases it) before asking ``is_alive``, whose answer is unchanged: the simulator's
scheduling and barriers work as before. It patches the simulator's thread class once
(guarded: a numba-cuda without that class is left alone); ``gpu/device.py`` calls it
when the simulator is on.
"""

from __future__ import annotations

import time

__all__ = ["poll_politely"]


def poll_politely() -> bool:
    """Patch the simulator's block threads (once); True when they are patched."""
    try:
        from numba.cuda.simulator import kernel as simulated
    except ImportError:  # pragma: no cover - another numba-cuda layout
        return False
    thread_class = getattr(simulated, "BlockThread", None)
    if thread_class is None:  # pragma: no cover
        return False
    if getattr(thread_class, "_hloref_polite_poll", False):
        return True
    alive = thread_class.is_alive

    def is_alive(self):
        time.sleep(0)  # let a waiting simulated thread have the GIL
        return alive(self)

    thread_class.is_alive = is_alive
    thread_class._hloref_polite_poll = True
    return True
