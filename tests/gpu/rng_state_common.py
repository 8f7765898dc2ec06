"""What the rng-state tests (tests/gpu/test_gpu_computation_rng_state*.py) share: a
module run on both backends, the state's words, and the initial state. Their module texts'
common parts are built by tests/hlo_modules.py."""

from __future__ import annotations

import warnings

import hloref
from hloref.evaluator.rng import RNG_STATE_INITIAL

from hlo_modules import state_read


S0 = RNG_STATE_INITIAL
M64 = 2**64 - 1
M32 = 2**32 - 1
W128 = 2**128


def both(text, *args):
    """(cpu, gpu) values of ``text``, the gpu without fallback (a fallback raises)."""
    m = hloref.parse(text)
    cpu = hloref.evaluate(m, *args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        gpu = hloref.evaluate(m, *args, backend="gpu", fallback=False)
    return cpu, gpu


def words(state):
    return [state % W128 & M64, state % W128 >> 64]


def read_low(name, delta):
    """HLO lines: ``{name}`` is the low word of the state a site of ``delta`` reads."""
    return state_read(delta, names=(f"{name}_s", f"{name}_v", name))
