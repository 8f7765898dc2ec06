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
