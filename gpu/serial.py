"""The serial call mode of compiled computations (``gpu/computation.py``): calls made
from one device thread in the CPU's call order, with per-evaluation channels.

Most computations an op calls are pure, and the op calls them from many threads at
once. One that reads or changes state of the evaluation at each call (today
rng-get-and-update-state: the CPU's one 128-bit state, advanced by each call's
``delta`` in its interpreter's call order) gives the CPU's values only when its calls
come one after another in the CPU's order. When that order has no closed form the
device could index (sites under a loop or a conditional, nested ops, or an op whose
calls depend on the data: sort, scatter, select-and-scatter, reduce-window's padding),
``compile_computation(..., serial=True)`` compiles it in this mode:

* its device function takes, after its parameters, one device argument per
  :class:`Channel` (``Compiled.channels``; their names ``Compiled.extra_params``), and
  each site, executed where the CPU's interpreter executes it (dead sites included,
  only the selected branch's), reads and updates its channel's buffer;
* ``Compiled.serial`` is True, and the op must make ALL its calls from ONE thread, in
  the CPU's call order (each op's docstring writes that order down): a kernel launched
  with one thread whose grid-stride loop walks the op's work in order
  (:func:`run_calls`), or a kernel written for that order;
* the contract around a launch: ``args = compiled.begin(ctx)`` (each channel stages
  its buffer from the evaluation ``ctx``), the kernel gets ``args`` after its own
  arguments and passes them to ``compiled.fn`` after the parameters; then
  ``compiled.finish(ctx)`` (each channel settles what the calls consumed into the
  evaluation: the state channel reads back 16 bytes, the sum of the deltas, and
  advances the evaluation's state). One ``begin``/``finish`` pair at a time per
  compiled computation; an op calling two computations (select-and-scatter) brackets
  each one's launch in turn, in the CPU's order of the two phases.

A computation without such sites has no channels and is never serial.
"""

from __future__ import annotations

from .elementwise import launch

__all__ = ["Channel", "run_calls"]


class Channel:
    """A per-evaluation resource of a serial computation: a device buffer its device
    function takes as the argument ``name``; :meth:`begin` stages it before the op's
    launch (returns the device argument), :meth:`finish` settles it after."""

    name = "channel"

    def begin(self, ctx):  # pragma: no cover - every channel defines it
        raise NotImplementedError

    def finish(self, ctx) -> None:  # pragma: no cover - every channel defines it
        raise NotImplementedError


def run_calls(compiled, ctx, kernel, n: int, *args) -> None:
    """Launch grid-stride ``kernel`` over ``n`` items whose work calls ``compiled.fn``:
    with the configured geometry, or, for a serial computation, from one thread (its
    loop then walks the items in order, 0 to n - 1) with the channels' arguments after
    ``args``, between ``compiled.begin(ctx)`` and ``compiled.finish(ctx)``."""
    if not compiled.serial:
        launch(kernel, n, *args)
        return
    extras = compiled.begin(ctx)
    if n > 0:
        kernel[1, 1](*args, *extras)
    compiled.finish(ctx)
