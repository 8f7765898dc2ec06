"""One step of XLA's chain, alone in a fresh process: the probe behind stage attribution.

``python -m hloref.fuzz.oracles.xla_probe JOB.pickle OUT.pickle`` reads a job
(``{"mode": ..., "text": ..., "args": [...], "debug_options": {...}}``), does it and
writes its answer. A fresh process (never a fork of a zygote) so that what only a
process start reads takes effect: ``XLA_FLAGS`` with ``--xla_backend_extra_options``
(LLVM's ``-opt-bisect-limit``, ``-opt-disable``), and so that the probe can run under
gdb. Before each step it writes ``HLOREF-STAGE <name>`` to stderr and flushes, so a
process that dies names the step it died in.

Modes:

* ``texts``: XLA's own views of the module along the import chain, each printed as
  HLO text where XLA can print it:

  - ``parsed``: ``hlo_module_from_text`` printed back (XLA's HLO parser), and
    ``parsed_proto``, the same module serialized (its literals as binary data);
  - ``stablehlo``: the StableHLO that ``hlo_to_stablehlo`` imports (MLIR text);
  - ``roundtrip``: that StableHLO converted back to HLO unchanged
    (``mlir_module_to_xla_computation``: the importer and the exporter);
  - ``canonicalized``: the StableHLO after MLIR's ``canonicalize`` (StableHLO's folders
    and canonicalization patterns), converted back to HLO.

  A step that raises records its error and the later steps are skipped.
* ``run``: compile (with ``debug_options``) and run on ``args``; the answer holds the
  value. Stages: ``parse``, ``import``, ``compile``, ``run``.
"""

from __future__ import annotations

import os
import pickle
import sys

__all__ = ["STAGE_MARK", "main"]

#: The stderr line the probe writes before each step.
STAGE_MARK = "HLOREF-STAGE "


def _mark(stage: str) -> None:
    os.write(2, f"{STAGE_MARK}{stage}\n".encode())


def _texts(text: str) -> dict:
    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib.mlir import ir, passmanager
    from jaxlib import xla_client as xc
    import jaxlib._jax as jaxmod

    out: dict = {}
    try:
        _mark("parse")
        module = xc.hlo.hlo_module_from_text(text)
        options = xc.hlo.HloPrintOptions()
        options.print_large_constants = True
        out["parsed"] = module.to_string(options)
        out["parsed_proto"] = module.as_serialized_hlo_module_proto()
        _mark("import")
        imported = jaxmod.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
        with jax_mlir.make_ir_context():
            mlir_module = ir.Module.parse(imported)
            out["stablehlo"] = str(mlir_module)
            _mark("export")
            out["roundtrip"] = jaxmod.mlir.mlir_module_to_xla_computation(
                imported, use_tuple_args=False, return_tuple=False).as_hlo_text(
                print_large_constants=True)
            _mark("stablehlo")
            pm = passmanager.PassManager.parse("builtin.module(func.func(canonicalize))")
            pm.run(mlir_module.operation)
            out["stablehlo_canonicalized"] = str(mlir_module)
            out["canonicalized"] = jaxmod.mlir.mlir_module_to_xla_computation(
                out["stablehlo_canonicalized"], use_tuple_args=False,
                return_tuple=False).as_hlo_text(print_large_constants=True)
    except Exception as exc:  # noqa: BLE001 - the answer says which step refused
        out["error"] = f"{type(exc).__name__}: {exc}"
    return out


def _run(text: str, args: list, debug_options: dict | None) -> dict:
    from jaxlib import xla_client as xc
    import jaxlib._jax as jaxmod

    from . import xla

    _mark("parse")
    module = xc.hlo.hlo_module_from_text(text)
    _mark("import")
    jaxmod.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
    _mark("compile")
    exe = xla.compile_hlo(text, debug_options=debug_options)
    _mark("run")
    value = exe.run(*args)
    _mark("done")
    return {"value": value}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    job_path, out_path = argv
    with open(job_path, "rb") as f:
        job = pickle.load(f)
    try:
        if job["mode"] == "texts":
            answer = _texts(job["text"])
        else:
            answer = _run(job["text"], job.get("args") or [], job.get("debug_options"))
    except Exception as exc:  # noqa: BLE001 - XLA refused: an answer, not a crash
        answer = {"error": f"{type(exc).__name__}: {exc}"}
    with open(out_path, "wb") as f:
        pickle.dump(answer, f, protocol=pickle.HIGHEST_PROTOCOL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
