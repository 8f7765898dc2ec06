"""The stages of the XLA oracle's chain, each with the component that owns it.

The ``xla`` oracle is a chain: XLA's HLO text parser, the HLO→StableHLO importer,
StableHLO folding and the conversion back to HLO, XLA's HLO passes, XLA:CPU's
emitters, LLVM's optimizations and code generation, and the runtime that executes the
thunks. Stage attribution (``fuzz/stages.py``) names the first stage whose output is
already wrong; this table says whose code that is and where a report is filed. Every
fact about a stage is written here once: the report, dedup and the docs read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from hloref.opcodes import GROUPS

__all__ = ["Stage", "STAGES", "stage", "component_of", "RUNTIME_THUNK_OPCODES"]

#: Opcodes XLA:CPU runs as runtime thunks, not generated kernels (the catalogue's
#: ``cpu-thunk`` group, with its source).
RUNTIME_THUNK_OPCODES = GROUPS["cpu-thunk"]


@dataclass(frozen=True)
class Stage:
    name: str
    #: what the stage is, in a maintainer's words ({pass_name} is filled in where known)
    component: str
    #: the tracker a report goes to
    repository: str
    #: where its code lives (repository-relative)
    source: str
    #: how attribution measures it
    measured_by: str


STAGES: tuple[Stage, ...] = (
    Stage("parse", "XLA's HLO text parser", "openxla/xla", "xla/hlo/parser/hlo_parser.cc",
          "XLA parses the text and prints it back (hlo_module_from_text); hloref evaluates "
          "the printed module"),
    Stage("import", "the HLO↔StableHLO translation (hlo_to_stablehlo and back, with the MHLO "
          "folders it applies)", "openxla/xla",
          "xla/hlo/translate/",
          "the imported StableHLO converted back to HLO unchanged "
          "(mlir_module_to_xla_computation), evaluated by hloref"),
    Stage("stablehlo", "StableHLO's folders (StablehloTargetIndependentOptimizationPass, run by "
          "XLA's StableHLO→HLO conversion) and canonicalization", "openxla/stablehlo",
          "stablehlo/transforms/optimization/",
          "a stablehlo op on constants folded away by the conversion back to HLO, or a "
          "StableHLO folding pattern on a crash's stack, or the StableHLO after MLIR's "
          "canonicalize converted back to HLO"),
    Stage("conversion", "XLA's StableHLO→HLO conversion when compiling (PJRT)", "openxla/xla",
          "xla/pjrt/mlir_to_hlo.cc",
          "XLA's before_optimizations dump (the HLO its passes start from)"),
    Stage("hlo-pass", "XLA HLO pass {pass_name}", "openxla/xla", "xla/hlo/transforms/, xla/service/",
          "XLA's dump after every pass; confirmed by compiling with the pass disabled "
          "(xla_disable_hlo_passes)"),
    Stage("emitter", "XLA:CPU code generation (its emitters; or LLVM's required passes and "
          "instruction selection, which opt-bisect does not skip)",
          "openxla/xla", "xla/backends/cpu/codegen/, xla/service/cpu/",
          "the optimized module is right, and XLA is still wrong with every optional LLVM "
          "pass skipped (-opt-bisect-limit=0)"),
    Stage("llvm", "LLVM pass {pass_name}", "llvm/llvm-project", "llvm/lib/",
          "LLVM's -opt-bisect-limit bisected to one pass; confirmed by -opt-disable of that "
          "pass alone"),
    Stage("runtime", "XLA:CPU runtime", "openxla/xla", "xla/backends/cpu/runtime/",
          "the process died while executing, after the compile finished"),
    Stage("buffer-assignment", "XLA's buffer assignment (BufferAssigner, and the "
          "CompiledMemoryStats read off it)", "openxla/xla", "xla/service/buffer_assignment.cc",
          "the memory audit (hloref memory): XLA's assignment checked against hloref's "
          "liveness, the module evaluated through the assignment, memory_analysis()'s "
          "figures against hloref's"),
    Stage("tf-xla", "TensorFlow's bundled XLA:CPU (the XlaCallModule route)",
          "tensorflow/tensorflow", "tensorflow/compiler/tf2xla/, third_party/xla/",
          "TensorFlow's XLA is wrong where jaxlib's XLA gives the right value on the same "
          "module"),
)

_BY_NAME = {s.name: s for s in STAGES}


def stage(name: str) -> Stage:
    return _BY_NAME[name]


def component_of(name: str | None, pass_name: str | None = None) -> str:
    """The component text of stage ``name`` (``{pass_name}`` filled in)."""
    if name is None:
        return "undetermined"
    text = _BY_NAME[name].component
    if "{pass_name}" not in text:  # a stage whose part is named only when measured
        return text + (f": `{pass_name}`" if pass_name else "")
    return text.format(pass_name=f"`{pass_name}`" if pass_name else "(not named)")
