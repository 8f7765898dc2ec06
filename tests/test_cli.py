"""The ``hloref`` command line: results checked against XLA, errors as one message."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from hloref.cli import main
from hloref.opcodes import ALL_OPCODES

from hlo_modules import MODULES

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

ADD_BF16 = """HloModule m
ENTRY e {
  x = bf16[3] parameter(0)
  y = (bf16[3], s8[2]) parameter(1)
  y0 = bf16[3] get-tuple-element(y), index=0
  y1 = s8[2] get-tuple-element(y), index=1
  s = bf16[3] add(x, y0)
  d = s8[2] add(y1, y1)
  ROOT t = (bf16[3], s8[2]) tuple(s, d)
}
"""


def _run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_run_example_matches_xla(tmp_path, capsys):
    """``hloref run --inputs --output`` gives what XLA:CPU computes on the same inputs."""
    xla = pytest.importorskip("hloref.fuzz.oracles.xla")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 8)).astype(np.float32)
    w1 = rng.standard_normal((8, 16)).astype(np.float32)
    b1 = rng.standard_normal(16).astype(np.float32)
    w2 = rng.standard_normal((16, 4)).astype(np.float32)
    b2 = rng.standard_normal(4).astype(np.float32)
    text = (EXAMPLES / "mlp.hlo").read_text()
    import hloref
    shapes = [p.shape for p in hloref.parse(text).entry.parameters]
    args = [x, w1, b1, w2, b2]
    assert [tuple(s.dims) for s in shapes] == [a.shape for a in args]
    np.savez(tmp_path / "in.npz", *args)
    code, out, err = _run(["run", str(EXAMPLES / "mlp.hlo"), "--inputs", str(tmp_path / "in.npz"),
                           "--output", str(tmp_path / "out.npz")], capsys)
    assert code == 0, err
    with np.load(tmp_path / "out.npz") as data:
        ours = data["arr_0"]
    expected = xla.run_hlo(text, *args)
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-5)


def test_run_tuple_parameter_and_raw_bits(tmp_path, capsys):
    """Tuple parameters are flattened in the npz; bf16 travels as raw uint16 bits."""
    x = np.array([1.5, -2.0, 3.0], ml_dtypes.bfloat16)
    y0 = np.array([0.25, 0.5, 1.0], ml_dtypes.bfloat16)
    y1 = np.array([100, -7], np.int8)
    (tmp_path / "m.hlo").write_text(ADD_BF16)
    np.savez(tmp_path / "in.npz", x.view(np.uint16), y0.view(np.uint16), y1)
    code, out, err = _run(["run", str(tmp_path / "m.hlo"), "--inputs", str(tmp_path / "in.npz"),
                           "--output", str(tmp_path / "out.npz"), "--print"], capsys)
    assert code == 0, err
    with np.load(tmp_path / "out.npz") as data:
        s = data["arr_0"].view(ml_dtypes.bfloat16)
        d = data["arr_1"]
    # by hand: bf16 sums are exact here; s8 wraps: 100 + 100 = 200 - 256 = -56
    assert s.tolist() == [1.75, -1.5, 4.0]
    assert d.tolist() == [-56, -14]
    assert "bf16[3]" in out and "s8[2]" in out


def test_run_seed_prints_and_matches_xla(tmp_path, capsys):
    """``--seed`` inputs are deterministic: XLA on the same seeded inputs agrees."""
    code, out, err = _run(["run", str(EXAMPLES / "while_loop.hlo"), "--seed", "3", "--print",
                           "--output", str(tmp_path / "out.npz")], capsys)
    assert code == 0, err
    assert "tuple" in out or "f32" in out
    xla = pytest.importorskip("hloref.fuzz.oracles.xla")
    import hloref
    from hloref.cli_common import flatten_value, random_arguments
    text = (EXAMPLES / "while_loop.hlo").read_text()
    expected = flatten_value(xla.run_hlo(text, *random_arguments(hloref.parse(text), 3)))
    with np.load(tmp_path / "out.npz") as data:
        ours = [data[f"arr_{i}"] for i in range(len(expected))]
    for a, b in zip(ours, expected):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("argv_tail, needle", [
    (["--inputs", "IN", "--seed", "1"], "either --inputs or --seed"),
])
def test_run_conflicting_options(tmp_path, capsys, argv_tail, needle):
    np.savez(tmp_path / "in.npz", np.zeros(3, np.float32))
    argv = ["run", str(EXAMPLES / "mlp.hlo")] + [str(tmp_path / "in.npz") if a == "IN" else a
                                                 for a in argv_tail]
    code, out, err = _run(argv, capsys)
    assert code == 2 and needle in err


def test_bad_inputs_shape_dtype_count(tmp_path, capsys):
    (tmp_path / "m.hlo").write_text(ADD_BF16)
    np.savez(tmp_path / "wrong_shape.npz", np.zeros(4, np.uint16), np.zeros(3, np.uint16),
             np.zeros(2, np.int8))
    code, _, err = _run(["run", str(tmp_path / "m.hlo"), "--inputs",
                         str(tmp_path / "wrong_shape.npz")], capsys)
    assert code == 2 and "expected dimensions [3]" in err and "got [4]" in err
    np.savez(tmp_path / "wrong_dtype.npz", np.zeros(3, np.float64), np.zeros(3, np.uint16),
             np.zeros(2, np.int8))
    code, _, err = _run(["run", str(tmp_path / "m.hlo"), "--inputs",
                         str(tmp_path / "wrong_dtype.npz")], capsys)
    assert code == 2 and "expected dtype bfloat16" in err
    np.savez(tmp_path / "few.npz", np.zeros(3, np.uint16))
    code, _, err = _run(["run", str(tmp_path / "m.hlo"), "--inputs", str(tmp_path / "few.npz")],
                        capsys)
    assert code == 2 and "has 1 array, the entry computation takes 3 (tuple parameters " \
        "flattened): 2 parameters" in err, err
    (tmp_path / "junk.npz").write_bytes(b"not a zip file")
    code, _, err = _run(["run", str(tmp_path / "m.hlo"), "--inputs", str(tmp_path / "junk.npz")],
                        capsys)
    assert code == 2 and "not a readable .npz" in err


def test_missing_file_and_directory(tmp_path, capsys):
    code, _, err = _run(["run", str(tmp_path / "nope.hlo")], capsys)
    assert code == 2 and "no such file" in err
    code, _, err = _run(["parse", str(tmp_path)], capsys)
    assert code == 2 and "is a directory" in err


def test_malformed_text_names_line_and_column(tmp_path, capsys):
    bad = "HloModule m\nENTRY e {\n  x = f32[3] parameter(0)\n  ROOT y = f32[3] frobnicate(x)\n}\n"
    (tmp_path / "bad.hlo").write_text(bad)
    code, _, err = _run(["parse", str(tmp_path / "bad.hlo")], capsys)
    assert code == 2
    assert f"{tmp_path / 'bad.hlo'}:4:" in err and "frobnicate" in err
    assert "Traceback" not in err


def test_memory_budget_refuses_before_allocating(tmp_path, capsys):
    text = ("HloModule m\nENTRY e {\n  x = f32[] parameter(0)\n"
            "  ROOT b = f32[100000,100000] broadcast(x), dimensions={}\n}\n")
    (tmp_path / "big.hlo").write_text(text)
    out_path = tmp_path / "out.npz"
    code, _, err = _run(["run", str(tmp_path / "big.hlo"), "--seed", "0", "--output",
                         str(out_path), "--max-bytes", "1000000"], capsys)
    assert code == 2 and "memory budget" in err and "%b" in err
    assert not out_path.exists()  # no half-written output


def test_while_iteration_limit(tmp_path, capsys):
    (tmp_path / "loop.hlo").write_text(MODULES["endless-while"])
    code, _, err = _run(["run", str(tmp_path / "loop.hlo"), "--max-while-iterations", "100"],
                        capsys)
    assert code == 2 and "100 iterations" in err and "%w" in err


def test_ops_table_lists_every_opcode(capsys):
    code, out, _ = _run(["ops"], capsys)
    assert code == 0
    for opcode in ALL_OPCODES:
        assert f"\n{opcode} " in out or out.startswith(opcode)
    assert "f8e4m3fn" in out and "f4e2m1fn" in out


def test_python_dash_m_no_traceback(tmp_path):
    """A real process: bad input gives exit status 2 and one message, no traceback."""
    (tmp_path / "bad.hlo").write_text("HloModule m\nENTRY e {\n  ROOT x = f32[2 parameter(0)\n}\n")
    proc = subprocess.run([sys.executable, "-m", "hloref", "run", str(tmp_path / "bad.hlo")],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "bad.hlo:3:" in proc.stderr


def test_run_verifies_the_module_first(tmp_path):
    # the declared f32[3] contradicts add's f32[2] operands: XLA rejects the module, so
    # hloref run names the instruction instead of printing an f32[2] (--no-verify: it does)
    import subprocess
    import sys
    path = tmp_path / "bad.hlo"
    path.write_text("HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  b = f32[2] parameter(1)\n"
                    "  ROOT c = f32[3] add(a, b)\n}\n")
    proc = subprocess.run([sys.executable, "-m", "hloref", "run", str(path), "--seed", "0"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "instruction %c, line 5" in proc.stderr and "f32[3]" in proc.stderr, proc.stderr
    proc = subprocess.run([sys.executable, "-m", "hloref", "run", str(path), "--seed", "0",
                           "--no-verify"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "f32[2]" in proc.stdout


def test_check_verifies_both_modules_first(tmp_path, capsys):
    # AFTER declares f32[3] for add's f32[2] operands, which XLA's verifier rejects: check
    # names the instruction (exit 2, one line) instead of judging AFTER's f32[2] value;
    # BEFORE is verified too
    good = ("HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  b = f32[2] parameter(1)\n"
            "  ROOT c = f32[2] add(a, b)\n}\n")
    bad = good.replace("ROOT c = f32[2]", "ROOT c = f32[3]")
    (tmp_path / "good.hlo").write_text(good)
    (tmp_path / "bad.hlo").write_text(bad)
    for before, after in (("good", "bad"), ("bad", "good")):
        code, out, err = _run(["check", str(tmp_path / f"{before}.hlo"),
                               str(tmp_path / f"{after}.hlo"), "--seed", "0"], capsys)
        assert code == 2 and out == "", (out, err)
        assert err.startswith("hloref: error:") and "Traceback" not in err
        assert "instruction %c, line 5" in err and "f32[3]" in err, err
    code, out, _ = _run(["check", str(tmp_path / "good.hlo"), str(tmp_path / "good.hlo"),
                         "--seed", "0"], capsys)
    assert code == 0 and "good.hlo" in out
