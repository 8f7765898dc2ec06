"""The freedoms XLA legitimately takes with a module's arithmetic, and how the
numerical envelope samples them (docs/semantics.md, "The numerical envelope"; the
freedoms themselves are described in ``perturb``)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

__all__ = ["Freedoms", "EnvelopePolicy", "simplifier_enabled"]


@dataclass(frozen=True)
class Freedoms:
    """The freedoms XLA takes that the envelope models; each can be switched off."""

    rounding: bool = True
    excess_precision: bool = True
    math_budgets: bool = True
    accumulation: bool = True
    ftz: bool = True
    #: explicit f32 -> narrow -> f32 convert pairs may be removed (XLA's
    #: SimplifyFPConversions, in GPU pipelines with excess precision); XLA:CPU keeps
    #: them, so by default an explicit convert (a quantization) rounds as written
    elide_converts: bool = False
    #: XLA's algebraic simplifier may rewrite the patterns of ``rewrites.REWRITES`` into
    #: forms that differ in floating point (``(A / B) / C`` as ``A / (B * C)``)
    rewrites: bool = True

    @classmethod
    def for_debug_options(cls, debug_options: dict | None) -> "Freedoms":
        """The freedoms XLA has under these debug options."""
        opts = debug_options or {}
        excess = opts.get("xla_allow_excess_precision", True)
        return cls(excess_precision=bool(excess), rewrites=simplifier_enabled(opts))


def simplifier_enabled(debug_options: dict | None) -> bool:
    """Whether XLA's algebraic simplifier runs under these debug options (it does unless
    ``xla_disable_hlo_passes`` names ``algsimp``)."""
    disabled = (debug_options or {}).get("xla_disable_hlo_passes", "")
    names = disabled.split(",") if isinstance(disabled, str) else list(disabled)
    return "algsimp" not in {str(n).strip() for n in names}


@dataclass(frozen=True)
class EnvelopePolicy:
    """How the envelope is sampled: ``samples`` perturbed runs, deviations widened by
    ``widen`` around the nominal value, random numbers from ``seed``; a marginal miss
    is judged again with ``confirm_samples`` runs (``envelope.confirmed``)."""

    samples: int = 8
    widen: float = 2.0
    seed: int = 0
    confirm_samples: int = 32
    freedoms: Freedoms = field(default_factory=Freedoms)

    def with_debug_options(self, debug_options: dict | None) -> "EnvelopePolicy":
        excess = (debug_options or {}).get("xla_allow_excess_precision", True)
        return replace(self, freedoms=replace(
            self.freedoms, excess_precision=bool(excess),
            rewrites=self.freedoms.rewrites and simplifier_enabled(debug_options)))
