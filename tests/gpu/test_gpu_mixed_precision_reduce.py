"""Mixed-precision reducers (``f(acc: f32, x: bf16)``) on the device: the sequential
kernel's left fold, the CPU's (``evaluator.reduce.mixed_precision``), ``fallback=False``,
bit for bit with the CPU backend and by hand (the values of
``tests/test_mixed_precision_reduce.py``)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

import hloref

from gpu_check import bits_equal


def _both(text, x):
    cpu = hloref.evaluate(text, x)
    gpu = hloref.evaluate(text, x, backend="gpu", fallback=False)
    assert hloref.gpu.last_report.total == 0
    assert bits_equal(gpu, cpu), (gpu, cpu)
    return gpu


def test_reduce_and_reduce_window_fold_from_the_left():
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from test_mixed_precision_reduce import REDUCE, WINDOW  # written once, there
    x = np.array([[2**24, 1, 1, 1], [1, 1, 1, 2**24]], ml_dtypes.bfloat16)
    np.testing.assert_array_equal(_both(REDUCE, x), np.array([2**24, 2**24 + 4], np.float32))
    e = 2.0 ** -8
    xw = np.array([1, e, e, e, e, e], ml_dtypes.bfloat16)
    np.testing.assert_array_equal(_both(WINDOW, xw),
                                  np.array([1 + 2 * e, 1 + 3 * e, 4 * e, 4 * e], np.float32))
