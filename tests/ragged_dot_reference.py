"""ragged-dot's values in numpy f64, written from operation_semantics' definition: the
references of the CPU test (tests/test_dot_variants.py) and the GPU backend's
(tests/gpu/test_gpu_dot_variants.py), for the modules ``MODULES["ragged-dot-non-contracting"]``
and ``MODULES["ragged-dot-contracting"]`` of tests/hlo_modules.py."""

from __future__ import annotations

import numpy as np


def ragged_non_contracting(lhs, rhs, sizes) -> np.ndarray:
    """lhs ``[m, k]``, rhs ``[g, k, n]``: the rows of group ``i`` (``sizes[i]`` rows in
    turn) are multiplied by ``rhs[i]``; rows past the total stay 0."""
    expected = np.zeros((lhs.shape[0], rhs.shape[2]))
    starts = np.cumsum([0] + list(sizes))
    for i in range(len(sizes)):
        rows = slice(starts[i], min(starts[i + 1], lhs.shape[0]))
        expected[rows] = lhs[rows].astype(np.float64) @ rhs[i]
    return expected


def ragged_contracting(lhs, rhs, sizes) -> np.ndarray:
    """lhs ``[m, k]``, rhs ``[k, n]``: output ``i`` contracts only group ``i``'s slice of
    the ``k`` dimension (``sizes[i]`` indices in turn); indices past the total are in no
    group."""
    starts = np.cumsum([0] + list(sizes))
    return np.stack([lhs[:, starts[i]:starts[i + 1]].astype(np.float64)
                     @ rhs[starts[i]:starts[i + 1]] for i in range(len(sizes))])
