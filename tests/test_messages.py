"""What a newcomer reads (issue 31): the CLI's messages, captured, say which value is
whose (hloref, XLA, before, after), what the verdict means, and what to do next."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hloref.cli import main

from hlo_modules import MODULES

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

ADD = ("HloModule m\nENTRY e {\n  a = f32[4] parameter(0)\n  b = f32[4] parameter(1)\n"
       "  ROOT c = f32[4] add(a, b)\n}\n")


def _run(argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_diff_match_never_says_mismatch(capsys):
    """examples/mlp.hlo: XLA:CPU's dot differs from hloref's beyond the 2-ulp floor but
    inside the envelope. The verdict is a match, and nothing under it says mismatch,
    expected or got: the two values are named hloref and XLA."""
    code, out, err = _run(["diff", EXAMPLES / "mlp.hlo", "--seed", "0"], capsys)
    assert code == 0, err
    assert out.startswith("verdict: match (oracle xla): XLA's value is inside"), out
    assert "mismatch" not in out and "expected" not in out and " got " not in out, out
    assert "beyond the ULP floor, all inside the envelope" in out, out
    assert ": hloref " in out and ", XLA " in out, out


def test_diff_json_names_the_values(capsys):
    code, out, err = _run(["diff", EXAMPLES / "mlp.hlo", "--seed", "0", "--json"], capsys)
    report = json.loads(out)
    assert code == 0 and report["verdict"] == "match", err
    assert "mismatch" not in out and '"expected"' not in out and '"actual"' not in out, out
    assert report["meaning"].startswith("XLA's value is inside")
    floor = report["ulp_floor"]
    assert floor["within"] is False and floor["hloref"] != floor["oracle_value"]


def test_check_names_before_and_after(tmp_path, capsys):
    """Both values of ``check`` are hloref's: they are BEFORE's and AFTER's."""
    (tmp_path / "before.hlo").write_text(ADD)
    (tmp_path / "after.hlo").write_text(ADD.replace("add(a, b)", "subtract(a, b)"))
    code, out, err = _run(["check", tmp_path / "before.hlo", tmp_path / "after.hlo"], capsys)
    assert code == 1, err
    assert "oracle" not in out and "XLA" not in out, out
    assert "verdict: mismatch: after's value is outside the numerical envelope around " \
           "before's value" in out, out
    assert ": before " in out and ", after " in out, out
    code, out, err = _run(["check", tmp_path / "before.hlo", tmp_path / "before.hlo"], capsys)
    assert code == 0 and "verdict: match: after's value is inside" in out, out
    assert "oracle" not in out, out


def test_diff_of_a_module_the_verifier_rejects_is_one_message(tmp_path, capsys):
    """A verifier error is bad input: one line on stderr, exit 2, no verdict naming an
    oracle that never ran."""
    (tmp_path / "bad.hlo").write_text(ADD.replace("ROOT c = f32[4]", "ROOT c = f32[5]"))
    code, out, err = _run(["diff", tmp_path / "bad.hlo"], capsys)
    assert code == 2 and out == "", out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hloref: error: computation e, "), err
    assert "oracle" not in err and "verdict" not in err and "hloref: hloref" not in err, err


@pytest.mark.parametrize("cut, line, col", [(200, 5, 19), (230, 6, 16)])
def test_a_file_cut_off_mid_shape_says_so(tmp_path, capsys, cut, line, col):
    """``head -c 200 examples/mlp.hlo`` ends after ``constant.1 = f32``: the message is
    about a shape missing its dimensions at the end of the file, not an unknown opcode
    'f32'."""
    text = (EXAMPLES / "mlp.hlo").read_text()[:cut]
    (tmp_path / "cut.hlo").write_text(text)
    code, out, err = _run(["run", tmp_path / "cut.hlo"], capsys)
    assert code == 2 and "unknown opcode" not in err, err
    assert err.startswith(f"hloref: error: {tmp_path / 'cut.hlo'}:{line}:{col}: expected "), err
    assert "found end of input (is the file cut off?)" in err, err


def test_an_element_type_without_dimensions_names_the_shape(tmp_path, capsys):
    (tmp_path / "m.hlo").write_text(ADD.replace("a = f32[4] parameter(0)",
                                                "a = f32 parameter(0)"))
    code, out, err = _run(["run", tmp_path / "m.hlo"], capsys)
    assert code == 2 and ":3:11: expected '[' after element type 'f32'" in err, err
    assert "unknown opcode" not in err, err


BF16_ADD = ADD.replace("f32", "bf16")


def test_inputs_saved_with_ml_dtypes_are_read_as_their_bits(tmp_path, capsys):
    """``numpy.savez`` stores a bf16 array as raw 2-byte voids: ``--inputs`` reads them as
    the bf16 parameter's bits (the sum checked with ml_dtypes' own bf16 rounding)."""
    import ml_dtypes
    import numpy as np
    x = np.array([1.5, -2.25, 3.0, 1e-3], ml_dtypes.bfloat16)
    y = np.array([0.0078125, 4.0, -3.0, 7.0], ml_dtypes.bfloat16)
    np.savez(tmp_path / "in.npz", x, y)
    (tmp_path / "m.hlo").write_text(BF16_ADD)
    code, out, err = _run(["run", tmp_path / "m.hlo", "--inputs", tmp_path / "in.npz",
                           "--output", tmp_path / "out.npz"], capsys)
    assert code == 0, err
    want = (x.astype(np.float32) + y.astype(np.float32)).astype(ml_dtypes.bfloat16)
    got = np.load(tmp_path / "out.npz")["arr_0"]
    assert got.dtype == np.uint16 and np.array_equal(got, want.view(np.uint16))


def test_inputs_errors_say_what_to_store(tmp_path, capsys):
    import ml_dtypes
    import numpy as np
    (tmp_path / "m.hlo").write_text(ADD.replace("f32", "f8e4m3fn"))
    np.savez(tmp_path / "wide.npz", *[np.zeros(4, ml_dtypes.bfloat16)] * 2)
    code, out, err = _run(["run", tmp_path / "m.hlo", "--inputs", tmp_path / "wide.npz"],
                          capsys)
    assert code == 2 and "expected dtype float8_e4m3fn (or its raw bits as uint8)" in err, err
    assert "store the raw bits, a.view(numpy.uint8)" in err, err
    np.savez(tmp_path / "many.npz", *[np.zeros(4, np.uint8)] * 3)
    code, out, err = _run(["run", tmp_path / "m.hlo", "--inputs", tmp_path / "many.npz"],
                          capsys)
    assert code == 2 and "has 3 arrays, the entry computation takes 2: 2 parameters" in err, err


HUGE_PARAMETER = ("HloModule m\nENTRY e {\n  s = f32[] parameter(0)\n"
                  "  x = f32[100000,100000] parameter(1)\n"
                  "  ROOT y = f32[100000,100000] add(x, x)\n}\n")


@pytest.mark.parametrize("budget", [None, "1000"])
def test_a_huge_parameter_gets_the_byte_count(tmp_path, capsys, budget):
    """A 40 GB parameter is refused before it is drawn, with its name and the byte counts
    (100000 * 100000 * 4 + 4 bytes), with or without --max-bytes; the flag is named."""
    (tmp_path / "m.hlo").write_text(HUGE_PARAMETER)
    argv = ["run", tmp_path / "m.hlo"] + (["--max-bytes", budget] if budget else [])
    code, out, err = _run(argv, capsys)
    limit = budget or str(8 << 30)
    assert code == 2 and "out of memory" not in err, err
    assert "the entry parameters take 40000000004 bytes (the largest, %x f32[100000,100000], " \
           f"40000000000 bytes), over the memory budget of {limit} bytes (--max-bytes)" in err, err


def test_limit_errors_name_the_flag(tmp_path, capsys):
    (tmp_path / "m.hlo").write_text(
        "HloModule m\nENTRY e {\n  x = f32[4] parameter(0)\n"
        "  ROOT y = f32[4,1000] broadcast(x), dimensions={0}\n}\n")
    code, out, err = _run(["run", tmp_path / "m.hlo", "--max-bytes", "1000"], capsys)
    assert code == 2 and "its result needs 16000 bytes" in err, err
    assert "(--max-bytes, hloref.Limits.max_bytes)" in err, err


def test_one_worker_campaign_prints_progress_off_a_terminal(tmp_path, capsys):
    """One worker (the default, and ci/fuzz_smoke.sh's) with stdout not a terminal (as
    here, captured) prints a progress line every --progress-every seconds; the end of
    a timed run is not reported as Hypothesis ending early."""
    code, out, err = _run(["fuzz", "--time", "4s", "--seed", "3", "--progress-every", "1",
                           "--out", tmp_path / "out"], capsys)
    assert code == 0, err
    progress = [l for l in out.splitlines() if l.startswith("[") and "programs" in l]
    assert len(progress) >= 2, out
    assert "FlakyStrategyDefinition" not in err and "ended early" not in err, err


def test_summary_says_what_outcomes_and_rejections_are():
    """--oracle both: outcomes are per program and oracle; rejection reasons are cut at a
    word and said to be expected."""
    from hloref.fuzz.stats import format_summary, reason
    long = ("XLA:CPU failed to compile the module: JaxRuntimeError: INTERNAL: during context "
            "[hlo verifier]: Seen floating point types of different precisions in %add = "
            "f32[2] add(f16[2] %a, f32[2] %b), but mixed precision is disallowed.")
    short = reason(long + "\nsecond line")
    assert len(short) <= 162 and short.endswith(" …") and long.startswith(short[:-2]), short
    assert long[len(short) - 2] == " ", short  # cut before a space, not inside a word
    assert reason("UNIMPLEMENTED: acosh\nmore") == "UNIMPLEMENTED: acosh"
    summary = {"programs": 3, "seconds": 1.0, "programs_per_second": 3.0, "instructions": 9,
               "instructions_per_second": 9.0, "time_split": {}, "opcodes_covered": ["add"],
               "opcodes_reachable": 90, "element_types_covered": ["f32"],
               "outcomes": {"match": 5, "rejected": 1}, "known_differences": {},
               "rejected": {short: 1}, "new_findings": 0, "duplicates": 0, "findings": [],
               "oracles": ["xla", "tf"]}
    text = format_summary(summary)
    assert "outcomes (each program checked against each of the 2 oracles, xla, tf: " \
           "2 outcomes per program, 6 in all)" in text, text
    assert "rejected programs (expected, not bugs:" in text and short in text, text


ENDLESS = MODULES["endless-while"]


def test_an_endless_loop_names_the_loop_and_the_flag(tmp_path, capsys):
    (tmp_path / "loop.hlo").write_text(ENDLESS)
    code, out, err = _run(["run", tmp_path / "loop.hlo", "--max-while-iterations", "1000"],
                          capsys)
    assert code == 2, err
    assert "instruction %w: while loop still running after 1000 iterations (" in err, err
    assert "condition %cond, body %body): endless, or it needs a higher limit " \
           "(--max-while-iterations, hloref.Limits.max_while_iterations)" in err, err


def test_the_default_limit_stops_an_endless_scalar_loop_within_a_minute():
    """With the default limits an endless scalar loop is stopped, not left running for
    minutes (1,000,000 iterations: 14 s on a quiet 2-core machine)."""
    import time

    import hloref
    from hloref.errors import HloLimitError
    t0 = time.perf_counter()
    with pytest.raises(HloLimitError, match="while loop still running"):
        hloref.evaluate(ENDLESS)
    assert time.perf_counter() - t0 < 75


def test_diff_of_an_optimized_module_says_what_to_do(tmp_path, capsys):
    """XLA cannot compile its own optimized layer norm again (its loop fusions carry no
    backend config): diff says so once and names check and check-dump."""
    import jax
    import jax.numpy as jnp

    def layer_norm(x, g):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return jnp.tanh((x - m) / jnp.sqrt(v + 1e-5) * g) @ x.T

    lowered = jax.jit(layer_norm).lower(jnp.ones((4, 8)), jnp.ones(8))
    (tmp_path / "before.hlo").write_text(lowered.as_text(dialect="hlo"))
    (tmp_path / "after.hlo").write_text(lowered.compile().as_text())
    code, out, err = _run(["diff", tmp_path / "after.hlo"], capsys)
    assert code == 2 and out == "", out
    assert err.count("XLA rejected the module") == 1, err
    assert "is a module after XLA's optimizations (is_scheduled=true)" in err, err
    assert f"hloref check BEFORE.hlo {tmp_path / 'after.hlo'}" in err and "check-dump" in err
    code, out, err = _run(["check", tmp_path / "before.hlo", tmp_path / "after.hlo"], capsys)
    assert code == 0 and "verdict: match" in out, (out, err)
    # in a dump directory, the module before optimizations beside it is named
    dump = tmp_path / "dump"
    dump.mkdir()
    before = dump / "module_0001.jit_layer_norm.before_optimizations.txt"
    after = dump / "module_0001.jit_layer_norm.cpu_after_optimizations.txt"
    before.write_text((tmp_path / "before.hlo").read_text())
    after.write_text((tmp_path / "after.hlo").read_text())
    code, out, err = _run(["diff", after], capsys)
    assert code == 2 and f"(hloref diff {before})" in err, err
    assert f"hloref check {before} {after}" in err and f"hloref check-dump {dump}" in err, err




def _help(command, capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    return capsys.readouterr().out


def test_every_option_of_every_command_is_documented(capsys):
    """Each option ``hloref COMMAND --help`` lists appears in the README or docs/cli.md,
    and ``--help`` says what the exit statuses mean."""
    import re

    from hloref.cli import build_parser
    from hloref.cli_common import EXIT_STATUSES
    commands = re.search(r"\{([a-z,-]+)\}", build_parser().format_usage()).group(1).split(",")
    assert {"run", "diff", "check", "fuzz", "replay"} <= set(commands) <= set(EXIT_STATUSES)
    docs = (ROOT / "README.md").read_text() + (ROOT / "docs" / "cli.md").read_text()
    missing = []
    for command in commands:
        text = _help(command, capsys)
        assert "exit status: 0 " in text, (command, text)
        options = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text)) - {"--help"}
        assert options or command == "ops"
        missing += [f"{command} {o}" for o in sorted(options) if o not in docs]
    assert not missing, missing
    cli_md = (ROOT / "docs" / "cli.md").read_text()
    for command in commands:
        assert f"hloref {command}" in cli_md, command


def test_skip_reasons_name_no_path_of_this_machine(tmp_path):
    """Without XLA's sources, the catalogue test's skip reason says what to set, not a
    path on the machine it was written on."""
    import os
    import subprocess
    import sys
    missing = str(tmp_path / "no-such-xla")
    env = {**os.environ, "HLOREF_XLA_MIRROR": missing}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                        "tests/test_catalogue.py::test_pinned_tables_match_the_mirror"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert "1 skipped" in r.stdout, r.stdout + r.stderr
    assert "HLOREF_XLA_MIRROR" in r.stdout and missing not in r.stdout, r.stdout
    assert "/work/" not in r.stdout, r.stdout


#: Packages of the extras (pyproject.toml): none may be needed to evaluate HLO.
EXTRA_PACKAGES = ("jax", "jaxlib", "tensorflow", "scipy", "hypothesis", "matplotlib", "ray",
                  "numba_cuda", "mpmath", "pytest", "redis")

CORE_ONLY = '''
import importlib, importlib.abc, pkgutil, sys
BLOCK = {block!r}

class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in BLOCK or name.startswith("numba.cuda"):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, Blocker())
import hloref, hloref.evaluator, hloref.fuzz
needs_extras = ("hloref.pytest_plugin", "hloref.fuzz.strategies", "hloref.__main__",
                "hloref.fuzz.worker_main", "hloref.fuzz.mutants", "hloref.fuzz.mutations",
                "hloref.fuzz.mutation_context", "hloref.fuzz.reach")
for pkg in (hloref, hloref.evaluator, hloref.fuzz):
    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
        if not m.name.startswith(needs_extras):
            importlib.import_module(m.name)
from hloref.cli import main
rc = main(sys.argv[1:])
loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCK or m.startswith("numba.cuda"))
print("rc", rc, "loaded", loaded)
'''


def _core_only(tmp_path, *argv):
    import subprocess
    import sys
    script = tmp_path / "core_only.py"
    script.write_text(CORE_ONLY.format(block=EXTRA_PACKAGES))
    return subprocess.run([sys.executable, str(script), *map(str, argv)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_the_core_evaluates_without_any_extra(tmp_path):
    """With none of the extras' packages importable, every module of hloref, its
    evaluator and fuzz/ (but the pytest plugin and the Hypothesis strategies: strategies/,
    the mutants and the campaign glue that draws them, reach) imports,
    and ``hloref run examples/mlp.hlo`` prints what numpy computes (x @ w1 + b1, relu,
    @ w2 + b2 on the seed-0 inputs)."""
    import numpy as np

    from hloref.cli_common import random_arguments
    from hloref.parser import parse_module
    r = _core_only(tmp_path, "run", EXAMPLES / "mlp.hlo", "--output", tmp_path / "out.npz")
    assert r.returncode == 0 and "rc 0 loaded []" in r.stdout, r.stdout + r.stderr
    module = parse_module((EXAMPLES / "mlp.hlo").read_text())
    x, w1, b1, w2, b2 = (a.astype(np.float64) for a in random_arguments(module, 0))
    want = np.maximum(x @ w1 + b1, 0) @ w2 + b2
    got = np.load(tmp_path / "out.npz")["arr_0"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("argv, extra", [
    (["diff", EXAMPLES / "mlp.hlo"], "jax"),
    (["diff", EXAMPLES / "mlp.hlo", "--oracle", "tf"], "tf"),
    (["fuzz", "--examples", "1"], "fuzz"),
    (["replay", "FINDING"], "jax"),
])
def test_a_command_needing_an_extra_names_it(tmp_path, argv, extra):
    finding = tmp_path / "finding"  # replay reads which oracle a finding needs first
    finding.mkdir()
    (finding / "finding.json").write_text('{"oracle": "xla", "verdict": "mismatch"}')
    r = _core_only(tmp_path, *[finding if a == "FINDING" else a for a in argv])
    assert "rc 2 loaded []" in r.stdout, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.strip().endswith(f"which is not installed: pip install 'hloref[{extra}]'")


def test_install_profiles():
    """The core needs numpy, numba and ml_dtypes only; the test profile installs every
    other extra."""
    import tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = sorted(d.split(">")[0].split("=")[0] for d in project["dependencies"])
    assert core == ["ml_dtypes", "numba", "numpy"]
    extras = project["optional-dependencies"]
    assert {"jax", "tf", "oracles", "fuzz", "gpu", "plot", "ray", "test"} <= set(extras)

    def packages(extra: str) -> set[str]:
        """The packages ``extra`` installs, following ``hloref[...]`` references."""
        import re
        out = set()
        for req in extras[extra]:
            m = re.fullmatch(r"hloref\[([a-z,]+)\]", req)
            if m:
                for e in m.group(1).split(","):
                    out |= packages(e)
            else:
                out.add(re.split(r"[\[<>=]", req)[0])
        return out

    everything = set().union(*(packages(e) for e in extras))
    assert packages("test") == everything
    assert packages("fuzz") == {"jax", "jaxlib", "hypothesis"}  # ci/main.sh's profile
    assert "tensorflow-cpu" not in packages("jax") and "ray" not in packages("fuzz")


@pytest.mark.parametrize("oracle, label", [("xla", "XLA"), ("tf", "TF's XLA")])
def test_front_end_reports_use_the_same_vocabulary(oracle, label):
    """hloref.jax / hloref.tf / pytest --hloref report through check_values: a value the
    framework returned that is off by one in an f32 add (hand-computed 1 + 2 = 3, given
    as 4) is a mismatch naming hloref's value and the oracle's by the shared labels."""
    import numpy as np

    from hloref._frontend import check_values
    from hloref.parser import parse_module
    module = parse_module(ADD)
    a, b = np.ones(4, np.float32), np.full(4, 2, np.float32)
    framework = np.array([3, 3, 4, 3], np.float32)
    report = check_values(module, [a, b], framework, oracle=oracle, names=["out['y']"],
                          localize=False, blame=False)
    text = report.summary()
    assert report.verdict == "mismatch" and report.paths == ["out['y'][2]"], text
    assert f"verdict: mismatch (oracle {oracle}): {label}'s value is outside the numerical " \
           "envelope around hloref's value" in text, text
    assert f"first at [2]: hloref 3.0, {label} 4.0" in text, text
    assert "expected" not in text and " got " not in text and "oracle 4.0" not in text, text
