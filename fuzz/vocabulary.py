"""One vocabulary for every report: whose value is which, and what a verdict means.

``hloref diff``, ``hloref check``, ``hloref check-dump``, campaigns, ``hloref.jax``,
``hloref.tf`` and the pytest plugin all compare two values of one module on the same
inputs. They name them the same way:

* **hloref**: hloref's value (the module evaluated as written); the numerical envelope
  is built around it.
* **XLA** (``--oracle xla``: XLA:CPU through jaxlib) or **TF's XLA** (``--oracle tf``):
  the value the oracle returned; it is the value being judged.
* **before** / **after** (``hloref check BEFORE AFTER``, the snapshots of
  ``check-dump``): both evaluated by hloref; the envelope is BEFORE's, AFTER's value is
  judged.

The verdict is about the judged value only: ``match`` means it is inside the envelope
(the values a correct implementation may return on these inputs, given the freedoms
XLA takes), ``mismatch`` that it is outside. A difference beyond the per-type ULP floor
that stays inside the envelope is reported as such, never as a mismatch.
"""

from __future__ import annotations

__all__ = ["HLOREF", "BEFORE", "AFTER", "oracle_label", "verdict_meaning", "VERDICT_MEANINGS"]

HLOREF = "hloref"
BEFORE = "before"
AFTER = "after"

_ORACLE_LABELS = {"xla": "XLA", "tf": "TF's XLA"}

#: What each verdict says, with ``{ours}`` (whose value the envelope is built around)
#: and ``{theirs}`` (the value judged).
VERDICT_MEANINGS = {
    "match": "{theirs}'s value is inside the numerical envelope around {ours}'s value "
             "(the values a correct implementation may return)",
    "mismatch": "{theirs}'s value is outside the numerical envelope around {ours}'s value",
    "known-gap": "the values differ where hloref's written semantics knowingly differs "
                 "from XLA's (a documented gap, fuzz/known_gaps.py; not a bug)",
    "known": "a catalogued XLA:CPU difference (fuzz/known_gaps.py, fuzz/known_bugs.py): "
             "counted, not filed again",
    "crash": "{theirs} crashed on the module",
    "timeout": "{theirs} ran past the time limit",
    "unsupported": "the module uses something hloref or {theirs} does not support: "
                   "nothing was compared",
    "error": "the module was rejected before the values could be compared",
}


def oracle_label(oracle: str | None) -> str:
    """The name of an oracle's value in reports: ``XLA`` for ``xla``, ``TF's XLA`` for
    ``tf``."""
    return _ORACLE_LABELS.get(oracle or "xla", oracle or "XLA")


def verdict_meaning(verdict: str, *, ours: str = HLOREF, theirs: str = "XLA") -> str:
    """One sentence saying what ``verdict`` means for these two values."""
    text = VERDICT_MEANINGS.get(verdict)
    return text.format(ours=ours, theirs=theirs) if text else verdict
