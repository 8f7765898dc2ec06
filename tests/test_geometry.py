"""hloref.geometry against the written semantics, element by element: a frame built
one source element at a time (operation_semantics §Pad and §ReduceWindow: element
``j`` of the base goes to ``low + j * dilation``; positions outside ``[0, extent)``
are cropped) and window positions counted one offset at a time."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hloref.attrs import WindowDim
from hloref.geometry import (base_index, dilate_pad_slices, padded_size, slice_output_size,
                             tap_data_positions, window_output_size, window_positions)


def _frame_by_hand(size, low, high, dilation):
    extent = max(low + high + size + max(size - 1, 0) * (dilation - 1), 0)
    frame = np.full(extent, -1)
    for j in range(size):
        q = low + j * dilation
        if 0 <= q < extent:
            frame[q] = j
    return frame


CASES = list(itertools.product(range(0, 5), range(-4, 4), range(-4, 4), range(1, 4)))


@pytest.mark.parametrize("size, low, high, dilation", CASES)
def test_dilate_pad_slices(size, low, high, dilation):
    extent, dst, src = dilate_pad_slices(size, low, high, dilation)
    want = _frame_by_hand(size, low, high, dilation)
    assert extent == len(want)
    frame = np.full(extent, -1)
    frame[dst] = np.arange(size)[src]
    assert frame.tolist() == want.tolist()
    assert max(padded_size(size, low, high, dilation - 1), 0) == extent


@pytest.mark.parametrize("extent, size, stride, dilation",
                         itertools.product(range(0, 9), range(1, 4), range(1, 4), range(1, 3)))
def test_window_positions(extent, size, stride, dilation):
    span = (size - 1) * dilation + 1
    count = 0
    while count * stride + span <= extent:  # window count * stride .. + span - 1 fits
        count += 1
    assert window_positions(extent, span, stride) == count


@pytest.mark.parametrize("size, wd, want", [
    (5, WindowDim(size=2), 4),
    (5, WindowDim(size=2, stride=2), 2),
    (5, WindowDim(size=3, padding_low=1, padding_high=1), 5),
    (3, WindowDim(size=2, base_dilation=2), 4),           # base 1_0_1_0_1: 5 wide
    (5, WindowDim(size=2, window_dilation=3), 2),         # span 4
    (2, WindowDim(size=4), 0),                             # does not fit
    (0, WindowDim(size=1, padding_low=1), 1),
])
def test_window_output_size(size, wd, want):
    assert window_output_size(size, wd) == want


@pytest.mark.parametrize("start, limit, stride, want",
                         [(0, 5, 1, 5), (0, 5, 2, 3), (1, 5, 3, 2), (2, 2, 1, 0), (0, 1, 4, 1)])
def test_slice_output_size(start, limit, stride, want):
    assert slice_output_size(start, limit, stride) == want == len(range(start, limit, stride))


@pytest.mark.parametrize("size, low, high, dilation", CASES[::3])
@pytest.mark.parametrize("wsize, stride, wdil", [(1, 1, 1), (2, 1, 2), (3, 2, 1), (2, 3, 2)])
def test_base_index_reads_the_frame(size, low, high, dilation, wsize, stride, wdil):
    frame = _frame_by_hand(size, low, high, dilation)
    span = (wsize - 1) * wdil + 1
    for pos in range(window_positions(len(frame), span, stride)):
        for tap in range(wsize):
            assert base_index(pos, tap, stride, wdil, low, dilation, size) == \
                frame[pos * stride + tap * wdil]


@pytest.mark.parametrize("size, low, high, dilation, tap, stride, wdil",
                         [(s, lo, hi, d, t, st, wd) for s, lo, hi, d in CASES[::7]
                          for t in range(3) for st in (1, 2, 3) for wd in (1, 2)])
def test_tap_data_positions_are_where_the_tap_reads_a_real_element(size, low, high, dilation,
                                                                    tap, stride, wdil):
    """By hand from the frame: the positions p whose element tap * wdil + p * stride is a
    real one (not padding, not a hole)."""
    frame = _frame_by_hand(size, low, high, dilation)
    span = 2 * wdil + 1  # a 3-tap window
    positions = max((len(frame) - span) // stride + 1, 0) if len(frame) >= span else 0
    want = [p for p in range(positions) if frame[tap * wdil + p * stride] >= 0]
    dst = dilate_pad_slices(size, low, high, dilation)[1]
    assert list(tap_data_positions(tap, positions, stride, wdil, dst)) == want
