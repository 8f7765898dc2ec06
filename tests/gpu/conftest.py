"""GPU backend tests: on a CUDA GPU, or in numba's CUDA simulator (no GPU needed).

The simulator must be enabled before ``numba.cuda`` is first imported, so this file
sets ``NUMBA_ENABLE_CUDASIM=1`` when numba.cuda is not imported yet (set the variable
to ``0`` to opt out). When numba.cuda was already imported in this process without the
simulator and there is no GPU, every test here is skipped: run them in their own
process with ``bash ci/run_gpu_sim_tests.sh``.
"""

from __future__ import annotations

import os
import sys
import warnings

import pytest

if "NUMBA_ENABLE_CUDASIM" not in os.environ and "numba.cuda" not in sys.modules:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"

from numba import cuda  # noqa: E402

try:
    from numba.cuda.core import config as _cfg
    SIMULATOR = bool(_cfg.ENABLE_CUDASIM)
except ImportError:  # pragma: no cover
    SIMULATOR = False

USABLE = SIMULATOR or cuda.is_available()


def _poll_without_starving_threads():
    """The simulator runs a block's threads as Python threads while the launching thread
    polls them in a busy loop (``BlockManager.run``: ``is_alive`` of every live thread,
    again and again). Every device-function call in a thread takes a per-module lock
    (``swapped_cuda_module``); when a thread waits for that lock or for the GIL, the
    poller keeps the GIL for a whole switch interval (5 ms), so a kernel that calls many
    device functions per element (a computation with ``rng`` in a map: Philox, stores)
    can fall into a convoy of one switch interval per call: a 2048-element map took
    40-85 s instead of 0.4 s, at random. Yielding the GIL at each poll (``sleep(0)``
    releases it) ends the convoy; ``is_alive`` still answers the same, so the
    simulator's scheduling and barriers are unchanged."""
    import time

    from numba.cuda.simulator import kernel as simulated

    thread_class = getattr(simulated, "BlockThread", None)
    if thread_class is None or getattr(thread_class, "_hloref_polite_poll", False):
        return
    alive = thread_class.is_alive

    def is_alive(self):
        time.sleep(0)
        return alive(self)

    thread_class.is_alive = is_alive
    thread_class._hloref_polite_poll = True


if SIMULATOR:
    _poll_without_starving_threads()
SKIP_REASON = ("no CUDA GPU, and numba's CUDA simulator is not enabled in this process "
               "(numba.cuda was imported before NUMBA_ENABLE_CUDASIM=1 could be set, or it is "
               "0): run `bash ci/run_gpu_sim_tests.sh`")


def pytest_collection_modifyitems(config, items):
    if USABLE:
        return
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.skip(reason=SKIP_REASON))


@pytest.fixture(autouse=True)
def small_launch_geometry():
    """8 threads x 4 blocks: small inputs span several blocks and every thread loops."""
    if not USABLE:
        yield
        return
    from hloref.gpu import config
    saved = config.THREADS_PER_BLOCK, config.MAX_BLOCKS
    config.THREADS_PER_BLOCK, config.MAX_BLOCKS = 8, 4
    with warnings.catch_warnings():
        # numpy scalar overflow/invalid warnings from simulated threads (wrap-around,
        # NaN-producing inputs) are expected
        warnings.filterwarnings("ignore", category=RuntimeWarning, message=".*(overflow|invalid|divide).*")
        yield
    config.THREADS_PER_BLOCK, config.MAX_BLOCKS = saved
