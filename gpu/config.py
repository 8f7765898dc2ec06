"""Launch geometry of every GPU kernel, from one place.

Every kernel is a grid-stride loop (``for i in range(cuda.grid(1), n, cuda.gridsize(1))``),
so any geometry is correct; these two values only decide how many threads run.
Tests shrink them (e.g. 8 threads x 4 blocks) so that small inputs span several
blocks and every thread walks the loop more than once. They are read at each launch,
so assigning ``hloref.gpu.config.THREADS_PER_BLOCK = 8`` takes effect at once.
"""

from __future__ import annotations

THREADS_PER_BLOCK = 256
MAX_BLOCKS = 1024


def geometry(n: int) -> tuple[int, int]:
    """``(blocks, threads_per_block)`` for a grid-stride loop over ``n`` items."""
    tpb = max(1, int(THREADS_PER_BLOCK))
    blocks = max(1, min(int(MAX_BLOCKS), (int(n) + tpb - 1) // tpb))
    return blocks, tpb
