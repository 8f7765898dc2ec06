"""``hloref memory --plot``: live bytes over the schedule (matplotlib, the ``plot`` extra).

hloref's live bytes per kind of buffer (arguments, constants, outputs, temporaries),
stacked, over the flattened schedule; XLA's allocations as horizontal lines (the bytes
of its argument, output, constant and temp allocations, cumulated) and, when known,
``memory_analysis()``'s peak.
"""

from __future__ import annotations

from .buffer_assignment import BufferAssignment
from .errors import HloError
from .liveness import Liveness

__all__ = ["plot_memory"]

_KINDS = (("argument", ("argument", "alias")), ("constant", ("constant",)),
          ("output", ("output",)), ("temp", ("temp",)))


def plot_memory(lv: Liveness, path: str, *, assignment: BufferAssignment | None = None,
                xla_peak: int | None = None, title: str = "") -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise HloError("--plot needs matplotlib (pip install 'hloref[plot]')") from exc
    times = list(range(len(lv.timeline)))
    fig, ax = plt.subplots(figsize=(10, 4.5))
    layers = [lv.series(kinds)[:len(times)] for _, kinds in _KINDS]
    ax.stackplot(times, *layers, labels=[name for name, _ in _KINDS], alpha=0.8)
    peak, at = lv.peak(0)
    ax.axvline(at, color="black", lw=0.8, ls=":")
    ax.annotate(f"peak {peak} B\n%{lv.peak_instruction()}", (at, peak), fontsize=8)
    if assignment is not None:
        figs = assignment.figures()
        level = 0
        for name in ("argument", "constant", "output", "temp"):
            level += figs[name] - (figs["alias"] if name == "output" else 0)
            ax.axhline(level, color="gray", lw=0.8, ls="--")
            ax.text(len(times) - 1, level, f"XLA +{name} allocations", fontsize=7,
                    ha="right", va="bottom")
    if xla_peak is not None:
        ax.axhline(xla_peak, color="red", lw=1)
        ax.text(0, xla_peak, "memory_analysis() peak", fontsize=7, color="red", va="bottom")
    ax.set_xlabel("schedule position")
    ax.set_ylabel("live bytes")
    ax.set_title(title or lv.module.name)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
