"""Stage attribution (fuzz/stages.py), pinned on stored findings: each stage of XLA's
chain is named on a finding whose fault the chain itself shows (XLA's own printed,
converted or dumped module, XLA with a pass disabled, XLA with LLVM's passes bisected).
The expected stages were checked against XLA's outputs, not against hloref."""

from __future__ import annotations

import json
import os

import pytest

from hloref.fuzz.filing import attribute_finding, root_key
from hloref.fuzz.findings import load_program
from hloref.fuzz.stages import Probe, _backtrace, attribute_crash, gdb_available, probe

pytest.importorskip("jax")

ROOT = os.path.join(os.path.dirname(__file__), "..", "findings")


def _attribute(name: str) -> dict:
    d = os.path.join(ROOT, name)
    if not os.path.isdir(d):  # reported or fixed upstream already
        d = os.path.join(ROOT, "known-upstream", name)
    with open(os.path.join(d, "finding.json"), encoding="utf-8") as f:
        meta = json.load(f)
    _, args = load_program(d)
    text = open(os.path.join(d, "module.hlo"), encoding="utf-8").read()
    return attribute_finding(text, args, meta["verdict"], meta.get("oracle", "xla"),
                             meta.get("debug_options") or None)


# (finding, stage, pass or None, confirmed, a fact the evidence must show)
PINNED = [
    # XLA's parser reads the constant (nan, inf) as (nan, nan): its printed module says so,
    # and so does its HloModuleProto, before any printing
    ("xla-cpu-jaxlib-0.10.2/divide-c64-constant-infinite-numerator", "parse", None, True,
     "(nan+infj) became (nan+nanj)"),
    # XLA's parser reads the literal -0 as +0 (its proto literal's sign bit is clear)
    ("xla-cpu-jaxlib-0.10.2/negative-zero-constant-print-parse-round-trip", "parse", None, True,
     "-0.0 became 0.0"),
    # before_optimizations already wrong; the unchanged StableHLO round trip folds the atanh
    ("xla-cpu-jaxlib-0.10.2/atanh-f4e2m1fn-constant-folding", "import", None, None,
     "StableHLO converted back unchanged: outside"),
    # the compile dies before XLA's passes, inside a StableHLO folding pattern
    ("xla-cpu-jaxlib-0.10.2/divide-u2-constant-zero-sigfpe", "stablehlo", "FoldDivOpPattern",
     True, "StableHLO pattern on the stack"),
    ("xla-cpu-jaxlib-0.10.2/slice-of-empty-concatenate-stablehlo-crash", "stablehlo",
     "SliceOpConcatSimplify", True, "StableHLO pattern on the stack"),
    # the imported StableHLO holds stablehlo.round_nearest_afz; converted back, it is folded
    ("xla-cpu-jaxlib-0.10.2/round-nearest-afz-f8e3m4-constant-folding", "stablehlo", None, None,
     "still holds `stablehlo.round_nearest_afz`"),
    ("xla-cpu-jaxlib-0.10.2/convert-c64-to-pred-segfault", "import", None, None,
     "died in step `import`"),
    ("xla-cpu-jaxlib-0.10.2/clz-s8-constant-folding", "hlo-pass", "constant_folding", True,
     "after constant_folding"),
    ("xla-cpu-jaxlib-0.10.2/s4-add-does-not-wrap", "hlo-pass", "float-normalization-s4", True,
     "after float-normalization-s4"),
    ("xla-cpu-jaxlib-0.10.2/convolution-lhs-dilate-simplifier-check-failure", "hlo-pass",
     "algsimp", True, "AlgebraicSimplifier"),
    ("xla-cpu-jaxlib-0.10.2/fusion-extra-operand-aborts", "hlo-pass", "layout-assignment", True,
     "LayoutAssignment"),
    # the optimized module is right and runtime thunks alone run it (SortThunk)
    ("xla-cpu-jaxlib-0.10.2/sort-s2-not-a-permutation", "runtime", None, True,
     "as a runtime thunk (sort)"),
    ("xla-cpu-jaxlib-0.10.2/convert-f4e2m1fn-to-s64-saturates", "emitter", None, True,
     "-opt-bisect-limit=0"),
    ("xla-cpu-jaxlib-0.10.2/concatenate-s2-aborts", "emitter", None, None,
     "died in code generation"),
    ("xla-cpu-jaxlib-0.10.2/reduce-s2-maximum-of-broadcast", "llvm", "ipsccp", True,
     "ipsccp"),
    ("xla-cpu-jaxlib-0.10.2/convert-bf16-to-pred-and-u16-llvm-cannot-select", "llvm", None,
     None, "died"),
    # TensorFlow's XLA only: jaxlib's XLA is right on the same module
    ("tf-2.21/atan2-zero-zero-nan", "tf-xla", None, True, "jaxlib's XLA: match"),
]


@pytest.mark.parametrize("name,stage,pass_name,confirmed,evidence", PINNED,
                         ids=[p[0].split("/")[1] for p in PINNED])
def test_stage_of_stored_finding(name, stage, pass_name, confirmed, evidence):
    a = _attribute(name)
    assert a["stage"] == stage, a["steps"]
    if pass_name is not None:
        assert a["pass"] == pass_name, a["steps"]
    if confirmed is not None:
        assert a["confirmed"] is confirmed, a.get("confirmation")
    seen = " ".join(str(w) for _, w in a["steps"]) + " " + " ".join(a.get("backtrace") or []) \
        + " " + (a.get("confirmation") or "")
    assert evidence in seen, a["steps"]


def test_crash_names_the_check_and_the_native_stack():
    assert gdb_available(), "ci/setup.sh installs gdb (apt-get) for native backtraces"
    a = _attribute("xla-cpu-jaxlib-0.10.2/concatenate-s2-aborts")
    assert "Check failed: bit_offset != nullptr" in a["fatal"]
    assert a["signal"] == "SIGABRT"
    assert any("xla::cpu::EmitFastConcatenate" in f for f in a["backtrace"])
    b = _attribute("xla-cpu-jaxlib-0.10.2/convert-bf16-to-pred-and-u16-llvm-cannot-select")
    assert "LLVM ERROR" in b["fatal"] and "Cannot select" in b["fatal"]


def test_probe_marks_the_step_it_died_in():
    # XLA's own StableHLO->HLO export folds an s32 division by a constant zero and traps
    text = ("HloModule m\nENTRY e {\n a = s32[2] constant({7, -7})\n"
            " b = s32[2] constant({0, 0})\n ROOT d = s32[2] divide(a, b)\n}\n")
    p = probe("texts", text)
    assert p.died and p.stage == "export" and p.signal == "SIGFPE"
    ok = probe("texts", "HloModule m\nENTRY e {\n ROOT a = f32[] constant(1)\n}\n")
    assert not ok.died and "constant(1)" in ok.answer["roundtrip"]


def test_runtime_crash_is_the_runtime(monkeypatch):
    """A process that dies after marking ``run`` died executing: the runtime."""
    import hloref.fuzz.stages as stages
    dead = Probe(None, -11, "SIGSEGV", "run", "HLOREF-STAGE compile\nHLOREF-STAGE run\n")
    monkeypatch.setattr(stages, "probe", lambda *a, **k: dead)
    a = attribute_crash("HloModule m\nENTRY e {\n ROOT a = f32[] constant(1)\n}\n", [])
    assert a.stage == "runtime" and a.component == "XLA:CPU runtime"


def test_backtrace_reads_gdb_and_xla_stacks():
    gdb = ("#7  0x00007fffed0381d9 in xla::llvm_ir::IrArray::EmitLinearArrayElementAddress"
           "(xla::llvm_ir::IrArray::Index const&, llvm::IRBuilderBase*) const () from /x/lib.so\n"
           "#9  0x00007fffe8d7705d in xla::cpu::EmitFastConcatenate(xla::HloInstruction const*)"
           " () from /x/lib.so\n")
    assert _backtrace(gdb) == ["#7 xla::llvm_ir::IrArray::EmitLinearArrayElementAddress",
                               "#9 xla::cpu::EmitFastConcatenate"]
    own = ("    @     0x7fffe8cd21c3  xla::cpu::ThunkEmitter::EmitConcatenateKernelThunk()\n"
           "    @     0x7fffe8a07463  xla::cpu::CpuCompiler::CompileCpuExecutable()\n")
    assert _backtrace(own) == ["xla::cpu::ThunkEmitter::EmitConcatenateKernelThunk",
                               "xla::cpu::CpuCompiler::CompileCpuExecutable"]


def test_bisect_log_is_read():
    p = Probe({}, 0, None, None,
              "BISECT: running pass (92) sroa on f\nBISECT: NOT running pass (93) instcombine "
              "on convert_fusion\n")
    assert p.bisect_passes() == {92: "sroa on f", 93: "instcombine on convert_fusion"}


def test_root_key_groups_variants_and_separates_causes():
    import hloref
    s8 = hloref.parse("HloModule m\nENTRY e {\n c = s8[] constant(-3)\n"
                      " ROOT z = s8[] count-leading-zeros(c)\n}\n")
    s16 = hloref.parse("HloModule m\nENTRY e {\n c = s16[2] constant({-3, 4})\n"
                       " ROOT z = s16[2] count-leading-zeros(c)\n}\n")
    folding = {"stage": "hlo-pass", "pass": "constant_folding"}
    assert root_key(folding, s8, None) == root_key(folding, s16, None)
    assert root_key(folding, s8, None) != root_key({"stage": "emitter"}, s8, None)
    assert root_key(folding, s8, None) != root_key({"stage": "hlo-pass", "pass": "algsimp"},
                                                   s8, None)


def test_two_parser_faults_in_the_same_operations_are_two_root_causes():
    # the stored parser findings: a divide of constants each, one losing a zero's sign
    # (f32), one a complex NaN's imaginary part; their measured causes keep them apart
    zero, nan = (_attribute(n) for n in (
        "xla-cpu-jaxlib-0.10.2/negative-zero-constant-print-parse-round-trip",
        "xla-cpu-jaxlib-0.10.2/divide-c64-constant-infinite-numerator"))
    assert zero["cause"] == "constant float: -0 -> +0"
    assert nan["cause"] == "constant complex: (nan, inf) -> (nan, nan)"
    import hloref
    module = hloref.parse("HloModule m\nENTRY e {\n c = f32[2] constant({1, -0})\n"
                          " ROOT d = f32[2] divide(c, c)\n}\n")
    assert root_key(zero, module, None) != root_key(nan, module, None)
    assert root_key(zero, module, None) == root_key(dict(zero), module, None)


def test_the_parser_fault_in_other_operations_and_types_is_the_archived_finding():
    # a campaign meets the -0 constant again in f16, behind a broadcast and a multiply
    # (seven times in one round of mutation campaigns): the measured cause is the same,
    # so is the root key, and the archive already holds it: counted, not filed again
    import hloref
    import numpy as np
    from hloref.fuzz.archive import archived_root_keys
    text = ("HloModule m\nENTRY e {\n  x = f16[4] parameter(0)\n  z = f16[] constant(-0)\n"
            "  b = f16[4] broadcast(z), dimensions={}\n  m = f16[4] multiply(x, x)\n"
            "  ROOT d = f16[4] divide(m, b)\n}\n")
    a = attribute_finding(text, [np.array([1, 2, -3, 4], np.float16)], "mismatch", "xla",
                          None)
    assert (a["stage"], a["confirmed"], a["cause"]) == ("parse", True,
                                                        "constant float: -0 -> +0")
    found = archived_root_keys().get(root_key(a, hloref.parse(text), "divide"))
    assert found == "xla-cpu-jaxlib-0.10.2/negative-zero-constant-print-parse-round-trip"
