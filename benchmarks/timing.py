"""Paired timing for the benchmarks: hloref and its reference measured in turns.

This machine's speed drifts over seconds (shared cores), so timing all hloref
repeats and then all reference repeats can hand one side a slow stretch. Here each
round times both once, in alternating order, and each side's median is reported;
the ratio is the median of the per-round ratios."""

from __future__ import annotations

import statistics
import time


def paired(ours, reference, repeat: int, clock=time.perf_counter) -> tuple[float, float, float]:
    """``(median ours s, median reference s, median of per-round ratios)``; ``clock``:
    ``time.process_time`` measures CPU seconds, which other processes on a shared
    machine do not inflate as they do wall time."""
    ours()  # warm-up: Numba compile or cache load, BLAS thread start
    reference()
    a, b, ratios = [], [], []
    for i in range(max(repeat, 1)):
        order = (ours, reference) if i % 2 == 0 else (reference, ours)
        t = {}
        for fn in order:
            t0 = clock()
            fn()
            t[fn] = clock() - t0
        a.append(t[ours])
        b.append(t[reference])
        ratios.append(t[ours] / t[reference] if t[reference] > 0 else float("inf"))
    return statistics.median(a), statistics.median(b), statistics.median(ratios)


def single(fn, repeat: int, clock=time.perf_counter) -> float:
    """Median seconds of ``fn`` after one warm-up call (``clock`` as in ``paired``)."""
    fn()
    samples = []
    for _ in range(max(repeat, 1)):
        t0 = clock()
        fn()
        samples.append(clock() - t0)
    return statistics.median(samples)
