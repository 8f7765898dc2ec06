"""What XLA:CPU's HLO passes rewrite, and which mutations make those patterns: the
table ``hloref fuzz --target-pass NAME`` aims with.

Each ``Pattern`` names a rewrite, where it is in XLA's source, and the mutations
(``fuzz/mutations.py``) that put the pattern into a program. Pass names are the ones
XLA's dump uses (``HloPassInterface::name()``). Sources were read in ROCm/xla, which
mirrors openxla/xla file for file, at commit
183fa00cb5d82384463a1a7aed1ab06bc9026974 (main, 2026-08-22); the quoted text is the
pass's own comment or ``VLOG`` line for the rewrite. Where the pass runs in XLA:CPU's
pipeline is ``xla/service/cpu/cpu_compiler.cc`` (``AddPass<...>``).

Measured with the jaxlib oracle: HLO text goes through StableHLO and back before
XLA's passes run, and StableHLO's folders already rewrite ``x + 0``, ``x * 1``,
``reshape(reshape(x))``, ``transpose(transpose(x))`` and zero padding, so algsimp's
dump shows none of them; ``copy(copy(x))`` and a slice of a pad do reach algsimp
(``tests/test_pass_coverage.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Pattern", "PASS_PATTERNS", "mutation_weights", "known_passes", "UnknownPassError"]

_ALGSIMP = "xla/hlo/transforms/simplifiers/algebraic_simplifier.cc"


@dataclass(frozen=True)
class Pattern:
    what: str
    source: str
    mutations: tuple[str, ...]


PASS_PATTERNS: dict[str, tuple[Pattern, ...]] = {
    "algsimp": (
        Pattern("A + 0 => A, 0 + A => A", f"{_ALGSIMP} HandleAdd: 'trying transform [A + 0 => A]'",
                ("identity_operation",)),
        Pattern("A - 0 => A; A - Const => A + (-Const)", f"{_ALGSIMP} HandleSubtract",
                ("identity_operation", "special_constant")),
        Pattern("LHS*1 => LHS, 1*RHS => RHS; (A * C1) * C2 => A * (C1 * C2)",
                f"{_ALGSIMP} HandleMultiply", ("identity_operation", "special_constant")),
        Pattern("A/1 => A", f"{_ALGSIMP} HandleDivide: 'trying transform [A/1 => A]'",
                ("identity_operation",)),
        Pattern("max/min with a constant bound (clamp forming)", f"{_ALGSIMP} HandleMaximum, "
                "HandleMinimum", ("identity_operation", "special_constant")),
        Pattern("convert(convert(A, T1), T2) => A when A is of T2", f"{_ALGSIMP} HandleConvert "
                "(comment '1. convert(convert(A, $TYPE1), $TYPE2) is simplified to A')",
                ("retype_subgraph",)),
        Pattern("a copy feeding a copy becomes one copy; copies eliminated when layouts allow",
                f"{_ALGSIMP} HandleCopy ('If a copy feeds a copy, make it a single copy')",
                ("layout_change",)),
        Pattern("no-op reshapes deleted; reshape(reshape) merged",
                f"{_ALGSIMP} HandleReshape ('Delete no-op reshapes', 'Merge reshapes')",
                ("layout_change",)),
        Pattern("transpose of transpose, transposes that are bitcasts",
                f"{_ALGSIMP} HandleTranspose, TransposeIsBitcast",
                ("layout_change", "permute_dimension_numbers")),
        Pattern("nop pads removed; negative padding becomes pad + slice; interior padding of "
                "size-1 dimensions dropped", f"{_ALGSIMP} HandlePad ('Eliminate nop pads "
                "(padding all zero), and replace a pad with negative padding ...')",
                ("change_window", "resize_parameter")),
        Pattern("no-op slices deleted; slice of a pad moved to the pad operand",
                f"{_ALGSIMP} HandleSlice ('Delete no-op slices', 'Is the result of the slice "
                "the pad operand')", ("change_window", "resize_parameter")),
        Pattern("dot: zero-element dot => broadcast 0; no contracting dims => multiply of "
                "broadcasts; operands swapped / transposes folded", f"{_ALGSIMP} HandleDot",
                ("permute_dimension_numbers", "change_window")),
        Pattern("convolution: padding/dilation of the input merged into the window; filter "
                "dilation merged; operands swapped", f"{_ALGSIMP} HandleConvolution ('Try to "
                "merge padding/dilation of the input with the convolution's window')",
                ("change_window", "permute_dimension_numbers")),
        Pattern("reduce-window / reduce with trivial windows or dimensions",
                f"{_ALGSIMP} HandleReduceWindow, HandleReduce", ("change_window",)),
        Pattern("conditional with a constant predicate or identical branches",
                f"{_ALGSIMP} HandleConditional", ("wrap_in_conditional",)),
        Pattern("pow(A, 0|1|2|3|-1|0.5) rewritten", f"{_ALGSIMP} HandlePower "
                "('trying transform [pow(A, 2) => A*A]')", ("special_constant",)),
    ),
    "transpose-folding": (
        Pattern("a transpose feeding a dot or convolution operand is folded into its "
                "dimension numbers", "xla/service/transpose_folding.cc",
                ("permute_dimension_numbers", "layout_change")),
    ),
    "call-inliner": (
        Pattern("call instructions are replaced by the callee's body",
                "xla/service/call_inliner.cc", ("wrap_in_call",)),
    ),
    "simplify-conditional": (
        Pattern("conditional with a constant predicate inlined; branches with one "
                "computation merged", "xla/service/conditional_simplifier.cc",
                ("wrap_in_conditional",)),
    ),
    "simplify-while-loops": (
        Pattern("while loops with a trip count of 0 or 1 removed; dead tuple elements of the "
                "loop state removed", "xla/service/while_loop_simplifier.cc",
                ("wrap_in_while",)),
    ),
    "while-loop-invariant-code-motion": (
        Pattern("loop-invariant instructions hoisted out of the body",
                "xla/service/while_loop_invariant_code_motion.cc", ("wrap_in_while",)),
    ),
    "tuple-simplifier": (
        Pattern("tuple(gte(t, 0), gte(t, 1), ...) => t; gte(tuple(...)) forwarded",
                "xla/hlo/transforms/simplifiers/tuple_simplifier.cc",
                ("wrap_in_while", "wrap_in_conditional")),
    ),
    "reshape-mover": (
        Pattern("reshapes/transposes moved past elementwise ops that have them on every "
                "operand", "xla/hlo/transforms/simplifiers/reshape_mover.cc",
                ("layout_change",)),
    ),
    "constant_folding": (
        Pattern("instructions on constants only evaluated at compile time",
                "xla/hlo/transforms/simplifiers/hlo_constant_folding.cc",
                ("special_constant", "identity_operation")),
    ),
    "cse": (
        Pattern("identical instructions merged", "xla/service/hlo_cse.cc",
                ("duplicate_output", "splice", "wrap_in_conditional")),
    ),
    "layout-assignment": (
        Pattern("layouts chosen for every instruction; copies inserted where a user "
                "needs another layout", "xla/service/layout_assignment.cc, "
                "xla/service/cpu/cpu_layout_assignment.cc", ("layout_change",
                                                             "permute_dimension_numbers")),
    ),
    "fusion": (
        Pattern("producers fused into consumers (loop fusion); CPU rules in "
                "CpuInstructionFusion::ShouldFuse", "xla/service/instruction_fusion.cc, "
                "xla/service/cpu/cpu_instruction_fusion.cc",
                ("identity_operation", "retype_subgraph", "layout_change")),
    ),
    "multi_output_fusion": (
        Pattern("sibling and producer-consumer fusions whose values are also outputs",
                "xla/service/multi_output_fusion.cc", ("duplicate_output",)),
    ),
    "zero_sized_hlo_elimination": (
        Pattern("zero-element instructions replaced by constants",
                "xla/hlo/transforms/simplifiers/zero_sized_hlo_elimination.cc",
                ("change_window", "resize_parameter")),
    ),
    "simplify-fp-conversions": (
        Pattern("convert(convert(x)) between float types removed",
                "xla/hlo/transforms/simplifiers/simplify_fp_conversions.cc",
                ("retype_subgraph",)),
    ),
    "batch-dot-simplification": (
        Pattern("dots with degenerate batch dimensions lose them",
                "xla/hlo/transforms/simplifiers/batch_dot_simplification.cc",
                ("permute_dimension_numbers", "resize_parameter")),
    ),
    "dot_decomposer": (
        Pattern("dots canonicalised to batch, then non-contracting, then contracting "
                "dimensions (transposes and reshapes inserted)",
                "xla/hlo/transforms/expanders/dot_decomposer.cc",
                ("permute_dimension_numbers",)),
    ),
}

class UnknownPassError(ValueError):
    """``--target-pass`` names a pass the table does not have."""


def known_passes() -> list[str]:
    return sorted(PASS_PATTERNS)


def mutation_weights(pass_name: str, *, boost: float = 4.0) -> dict[str, float]:
    """Mutation name → weight for aiming at ``pass_name``: 1, plus ``boost`` for each
    of the pass's patterns a mutation makes."""
    if pass_name not in PASS_PATTERNS:
        raise UnknownPassError(f"--target-pass {pass_name}: no pattern table for it; known "
                               f"passes: {', '.join(known_passes())}")
    from .mutations import MUTATIONS
    weights = {name: 1.0 for name in MUTATIONS}
    for pattern in PASS_PATTERNS[pass_name]:
        for m in pattern.mutations:
            weights[m] += boost
    return weights
