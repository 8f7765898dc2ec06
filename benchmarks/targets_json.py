"""Target records the benchmarks write with ``--json FILE`` and ``targets.py`` reads.

A record: ``{"item": "32.3", "name": "add f32[65536] / numpy", "value": 2.1,
"target": 2.0, "unit": "x", "met": false}``; ``met`` is ``value <= target``."""

from __future__ import annotations

import json


class Records:
    """Collects a benchmark's target records; ``write(path)`` when ``--json`` was given."""

    def __init__(self) -> None:
        self.items: list[dict] = []

    def add(self, item: str, name: str, value: float, target: float | None, unit: str = "x",
            note: str = "") -> str:
        """Record one measured value against its target; returns ``met``/``NOT met``."""
        met = None if target is None else bool(value <= target)
        self.items.append({"item": item, "name": name, "value": float(value),
                           "target": target, "unit": unit, "met": met, "note": note})
        return "" if met is None else ("met" if met else "NOT met")

    def write(self, path: str | None) -> None:
        if path:
            with open(path, "w", encoding="utf-8") as f:
                json.dump(self.items, f, indent=1)
