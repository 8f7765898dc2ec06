"""What the verifier tests (tests/test_verifier*.py) share: XLA as the oracle
(parse, convert to StableHLO, compile for the CPU; in a child process where XLA's parser
may crash) and hloref's verifier on a text."""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")
import jax.extend  # noqa: E402

import hloref  # noqa: E402
from hloref.verifier import verify_module  # noqa: E402


def xla_client():
    from jaxlib import xla_client as xc
    return xc


def xla_accepts(text: str) -> tuple[bool, str]:
    """(True, "") when XLA parses, type-checks and compiles ``text``."""
    xc = xla_client()
    from jax._src.interpreters import mlir as jmlir
    from jax._src.lib.mlir import ir
    from jaxlib import _jax
    try:
        m = xc.hlo.hlo_module_from_text(text)
        bc = _jax.mlir.hlo_to_stablehlo(m.as_serialized_hlo_module_proto())
        backend = jax.extend.backend.get_backend("cpu")
        devs = xc.DeviceList(tuple(backend.local_devices()[:1]))
        with jmlir.make_ir_context():
            mod = ir.Module.parse(bc)
            backend.compile_and_load(mod, executable_devices=devs,
                                     compile_options=xc.CompileOptions())
    except Exception as e:  # noqa: BLE001 - any failure means XLA rejects the module
        return False, f"{type(e).__name__}: {e}"
    return True, ""


CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from verifier_common import xla_accepts
for line in sys.stdin:
    ok, why = xla_accepts(json.loads(line))
    print(json.dumps([ok, why[:2000]]), flush=True)
"""


def xla_accepts_isolated(texts: list[str]) -> list[tuple[bool, str]]:
    """``xla_accepts`` for each text in a child process: XLA's parser *crashes*
    (SIGSEGV) on some invalid modules (get-tuple-element index out of range), which
    counts as not accepting them. The child restarts after a crash."""
    import json
    import os
    import subprocess
    import sys
    results: list[tuple[bool, str]] = []
    while len(results) < len(texts):
        todo = texts[len(results):]
        proc = subprocess.run([sys.executable, "-c", CHILD, os.path.dirname(__file__)],
                              input="".join(json.dumps(t) + "\n" for t in todo),
                              capture_output=True, text=True, timeout=300)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("[")]
        results.extend(tuple(json.loads(ln)) for ln in lines)
        if len(results) < len(texts):  # the child died on texts[len(results)]
            results.append((False, f"XLA crashed (exit status {proc.returncode})"))
    return results


def verify_text(text: str):
    return verify_module(hloref.parse(text), collect=True)


REDUCER = """add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


def mod(body: str, params: str = "p = f32[2,3] parameter(0)", extra: str = "") -> str:
    return f"HloModule broken\n\n{extra}\nENTRY main {{\n  {params}\n  {body}\n}}\n"
