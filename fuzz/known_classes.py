"""Every known class, one table: :data:`KNOWN_CLASSES`, the ``KnownClass`` records of
``known_gaps`` (implementation-defined answers), ``known_differences`` (what a culprit
instruction shows), ``known_bugs`` (module structure: folders, passes, crashes) and
``undetermined`` (where the module and inputs determine no single value).

:func:`known_class` is the one check every entry point runs (``diff`` and through it
campaigns, ``replay``, ``hloref.jax``, ``hloref.tf`` and the pytest plugin): every
record in one unordered loop, then the stated rule of ``known_record.rank`` where
several match. The docs' table of known classes is :func:`markdown_table`'s
(``docs/semantics.md``; a test checks it is current).
"""

from __future__ import annotations

from .known_bugs import RECORDS as _BUGS
from .known_differences import RECORDS as _DIFFERENCES
from .known_gaps import RECORDS as _GAPS
from .known_record import Case, KnownClass, rank
from .undetermined import RECORDS as _UNDETERMINED

__all__ = ["KNOWN_CLASSES", "BY_NAME", "KNOWN_GAPS", "KNOWN_DIFFERENCES", "FILED",
           "known_class", "matching", "known_gap", "known_difference", "known_folding",
           "known_crash", "markdown_table", "Case", "KnownClass"]

#: the table (its order means nothing: :func:`known_class` decides by ``rank``)
KNOWN_CLASSES: tuple[KnownClass, ...] = _UNDETERMINED + _GAPS + _DIFFERENCES + _BUGS

BY_NAME: dict[str, KnownClass] = {r.name: r for r in KNOWN_CLASSES}
if len(BY_NAME) != len(KNOWN_CLASSES):  # pragma: no cover - a table error, caught on import
    raise ValueError("two known classes share a name")

#: name -> reason of the classes that make a difference no finding (``known-gap`` and
#: ``undetermined`` verdicts)
KNOWN_GAPS: dict[str, str] = {r.name: r.reason for r in KNOWN_CLASSES
                              if r.kind in ("gap", "undetermined")}
#: name -> reason of XLA's known bugs and limitations (still a mismatch or a crash)
KNOWN_DIFFERENCES: dict[str, str] = {r.name: r.reason for r in KNOWN_CLASSES
                                     if r.kind == "xla-difference"}
#: the known differences that are stored findings: campaigns count them as known, while
#: ``hloref replay`` of the stored finding still says whether it reproduces
FILED = frozenset(r.name for r in KNOWN_CLASSES if r.finding)


def matching(case: Case, classes=KNOWN_CLASSES, kinds=None) -> list[KnownClass]:
    """Every record of ``classes`` (of ``kinds``, where given) whose verdicts include the
    case's and whose predicate holds, in no particular order."""
    return [r for r in classes
            if (kinds is None or r.kind in kinds) and case.verdict in r.verdicts
            and r.predicate(case)]


def known_class(case: Case, classes=KNOWN_CLASSES, kinds=None) -> KnownClass | None:
    """The record that explains ``case``, or None: of the records that match, the first
    by ``known_record.rank`` (undetermined before gap before XLA difference, then the
    greater specificity, then the name), whatever the order of ``classes``."""
    found = matching(case, classes, kinds)
    return min(found, key=rank) if found else None


def _name(record: KnownClass | None) -> str | None:
    return record.name if record is not None else None


def _parsed(module):
    if module is None or not isinstance(module, str):
        return module
    try:
        import hloref
        return hloref.parse(module)
    except Exception:  # noqa: BLE001 - no module, no explanation from it
        return None


def known_gap(module, values: dict, oracle: str = "xla", report=None) -> str | None:
    """The gap or undetermined class that explains a difference of ``module`` (hloref's
    entry values ``values``), or None."""
    case = Case("mismatch", _parsed(module), dict(values or {}), report=report, oracle=oracle)
    return _name(known_class(case, kinds=("gap", "undetermined")))


def known_difference(report, module=None, args=None) -> str | None:
    """The XLA difference that explains a mismatch ``report``, or None (``module`` and
    ``args``, where given, let the module-structure classes look too)."""
    case = Case("mismatch", _parsed(module), dict(getattr(report, "entry_values", {}) or {}),
                args, report)
    return _name(known_class(case, kinds=("xla-difference",)))


def known_folding(report, module, args) -> str | None:
    """The XLA difference that explains ``report`` (a mismatch) with ``module``'s
    structure and hloref's values on ``args``, or None."""
    if getattr(report, "verdict", None) != "mismatch":
        return None
    return known_difference(report, module, args)


def known_crash(report, module, args) -> str | None:
    """The XLA difference that explains a crash ``report`` of ``module`` on ``args``."""
    if getattr(report, "verdict", None) != "crash":
        return None
    module = _parsed(module)
    if module is None:
        return None
    case = Case("crash", module, dict(getattr(report, "entry_values", {}) or {}), args, report)
    return _name(known_class(case, kinds=("xla-difference",)))


def markdown_table(classes=KNOWN_CLASSES) -> str:
    """The docs' table of known classes, from the records, sorted by kind and name."""
    lines = ["| class | kind | component | stored finding | upstream | reason |",
             "|---|---|---|---|---|---|"]
    for r in sorted(classes, key=lambda r: (rank(r)[0], r.name)):
        cells = [f"`{r.name}`", r.kind, r.component, f"`{r.finding}`" if r.finding else "—",
                 r.upstream or "—", r.reason]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"
