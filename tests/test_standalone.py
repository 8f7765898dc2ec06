"""Standalone reproducers (fuzz/standalone.py): every stored finding's script, run in a
fresh process without hloref, gives the value the finding stored from XLA (bit for bit)
or crashes as it did; literals rebuild their arrays exactly."""

from __future__ import annotations

import ast

import ml_dtypes
import numpy as np
import pytest
from stored_findings import DIRS, IDS, load

from hloref.fuzz.standalone import (array_literal, first_difference, run_script,
                                    standalone_script)


def imported_modules(script: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(script)):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.add((node.module or "").split(".")[0])
    return names


@pytest.mark.parametrize("d", DIRS, ids=IDS)
def test_stored_finding_reproduces_standalone(d):
    f = load(d)
    script = standalone_script(f.text, f.inputs, oracle=f.oracle, debug_options=f.debug_options,
                               expected=f.expected, actual=f.actual)
    allowed = {"json", "os", "numpy", "ml_dtypes"}
    allowed |= {"jax", "jaxlib"} if f.oracle == "xla" else {"tensorflow"}
    assert imported_modules(script) <= allowed, imported_modules(script) - allowed
    run = run_script(script)
    assert "expected[0]" in run.stdout  # printed before running, so a crash shows it too
    if f.verdict == "crash":
        assert run.crashed and run.returncode != 0 and run.signal is not None, run.stdout
        assert f.signal in ("crash", run.signal)
        assert run.values == []
        return
    assert run.returncode == 0, run.stderr_tail
    assert run.verdict == "MISMATCH"
    assert first_difference(run.values, f.expected) is not None
    assert [(v.dtype, v.shape) for v in run.values] == [(a.dtype, a.shape) for a in f.actual]
    pick = f.part or (lambda leaves: leaves)
    assert [v.tobytes() for v in pick(run.values)] == [a.tobytes() for a in pick(f.actual)]


def test_a_script_that_imports_hloref_fails_in_run_script():
    run = run_script("import hloref\nprint('imported')\n")
    assert run.returncode == 1 and "imported" not in run.stdout
    assert "must not need hloref" in run.stderr_tail


def test_the_script_prints_match_for_the_value_xla_gives():
    """s8 clz of the parameter -3 (0xFD) is 0 leading zeros; a MATCH against that,
    a MISMATCH naming the index against 1 (by hand)."""
    text = ("HloModule m\nENTRY e {\n  p = s8[2] parameter(0)\n"
            "  ROOT c = s8[2] count-leading-zeros(p)\n}\n")
    x = np.array([-3, 1], np.int8)
    run = run_script(standalone_script(text, [x], expected=np.array([0, 7], np.int8)))
    assert run.verdict == "MATCH" and run.values[0].tolist() == [0, 7]
    run = run_script(standalone_script(text, [x], expected=np.array([0, 6], np.int8)))
    assert run.verdict == "MISMATCH" and "at index (1,)" in run.stdout


def test_debug_options_reach_the_compiler():
    """An unknown option name goes through env_option_overrides, which XLA validates:
    the script fails to compile with XLA's message."""
    text = "HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n  ROOT n = f32[] negate(p)\n}\n"
    run = run_script(standalone_script(text, [np.float32(2)],
                                       debug_options={"xla_no_such_option": True}))
    assert run.returncode == 1 and "xla_no_such_option" in run.stderr_tail
    run = run_script(standalone_script(text, [np.float32(2)],
                                       debug_options={"xla_backend_optimization_level": 0}))
    assert run.returncode == 0 and run.values[0].tolist() == -2.0


CASES = [
    np.array([1.5, -0.0, np.inf, -np.inf, np.nan], np.float32),
    np.array([0x7FC00001, 0xFFC00000], np.uint32).view(np.float32),  # payload, -NaN
    np.array([[complex(np.nan, np.inf), complex(-0.0, 1)]], np.complex128),
    np.array([0x7FF8000000000001, 0], np.uint64).view(np.complex128),
    np.array(np.float64(5e-324)),
    np.array([True, False]),
    np.array([[2**64 - 1]], np.uint64),
    np.zeros((0, 3), np.complex64),
    np.array([-2, 1, 0], ml_dtypes.int2),
    np.array([[1.5, -0.0], [np.nan, 6.0]], ml_dtypes.float4_e2m1fn),
    np.array(3.0, ml_dtypes.float8_e8m0fnu),
    np.array([0xFFFF, 0x7FC1], np.uint16).view(ml_dtypes.bfloat16),
]


@pytest.mark.parametrize("a", CASES, ids=[f"{a.dtype}{list(a.shape)}" for a in CASES])
def test_array_literal_rebuilds_the_array_exactly(a):
    text = array_literal(a)
    back = eval(text, {"np": np, "ml_dtypes": ml_dtypes})  # noqa: S307 - our own literal
    assert back.dtype == a.dtype and back.shape == a.shape
    assert back.tobytes() == a.tobytes()
    if a.dtype.type.__module__.startswith("ml_dtypes"):
        assert ".view(ml_dtypes." in text  # narrow types as raw bits


def test_readable_types_are_written_as_values():
    assert array_literal(np.array([1.5, -2.0], np.float32)) == "np.array([1.5, -2.0], np.float32)"
    assert array_literal(np.array([0x7FC00001], np.uint32).view(np.float32)).startswith(
        "np.array([0x7fc00001], np.uint32).view(np.float32)")


def test_unknown_oracle_is_refused():
    with pytest.raises(ValueError, match="oracle must be"):
        standalone_script("HloModule m\nENTRY e {\n ROOT c = s8[] constant(1)\n}\n", [],
                          oracle="gpu")
