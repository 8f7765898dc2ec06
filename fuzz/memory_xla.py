"""XLA:CPU's memory figures and buffer assignment for a program, from a child process.

``compile_for_memory(text)`` compiles a module (StableHLO text, as
``jax.jit(f).lower(...).as_text()`` prints it, which keeps donation; or HLO text) with
``--xla_dump_to`` in a fresh ``python -m hloref.fuzz.memory_xla`` process and returns an
:class:`XlaMemory`: ``memory_analysis()``'s figures (``CompiledMemoryStats``: argument,
output, alias, temp, peak, and the host ones), the optimized module and the buffer
assignment, both as XLA dumped them. XLA aborting, crashing or hanging kills the child,
not the caller: it comes back as :class:`XlaMemoryError`.

``read_dump(directory)`` finds the same files in an ``--xla_dump_to`` directory.
``audit_hlo_text(text, args)`` compiles an HLO module and audits what XLA made of it.
Campaigns (``fuzz/memory_campaign.py``) compile in their oracle worker instead
(``OracleWorker.memory``, which runs :func:`compile_in_worker` in the child): the
same files, without a new process per program.
"""

from __future__ import annotations

import glob
import os
import pickle
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

__all__ = ["XlaMemory", "XlaMemoryError", "compile_for_memory", "read_dump", "STATS_FIELDS",
           "audit_hlo_text", "compile_in_worker", "stats_of"]

STATS_FIELDS = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
                "temp_size_in_bytes", "peak_memory_in_bytes", "host_argument_size_in_bytes",
                "host_output_size_in_bytes", "host_alias_size_in_bytes",
                "host_temp_size_in_bytes", "generated_code_size_in_bytes")


def stats_of(stats) -> dict:
    """``CompiledMemoryStats`` as a dict of its figures, with what its serialized buffer
    assignment says about the peak (``fuzz/memory_proto.py``): ``heap_simulator_traces``
    (how many traces XLA's ``ComputePeakMemory`` replays) and ``recounted_peak_in_bytes``
    (its answer, replayed here)."""
    out = {k: int(getattr(stats, k)) for k in STATS_FIELDS if hasattr(stats, k)}
    raw = getattr(stats, "serialized_buffer_assignment_proto", None)
    if raw:
        from .memory_proto import peak_from_proto
        recount = peak_from_proto(bytes(raw))
        out["heap_simulator_traces"] = recount.heap_simulator_traces
        out["recounted_peak_in_bytes"] = recount.peak
    return out


class XlaMemoryError(RuntimeError):
    """XLA refused, crashed on or hung on the module."""


@dataclass
class XlaMemory:
    optimized: str
    assignment: str
    stats: dict = field(default_factory=dict)
    #: the dump files used (for messages)
    optimized_path: str = ""
    assignment_path: str = ""


def read_dump(directory: str, module: str | None = None) -> tuple[str, str]:
    """(optimized module path, buffer-assignment path) in an ``--xla_dump_to`` directory:
    the ``*cpu_after_optimizations.txt`` whose module name contains ``module`` (the only
    or the largest one when not given) and the ``-buffer-assignment.txt`` beside it."""
    found = sorted(glob.glob(os.path.join(directory, "*after_optimizations.txt")))
    if module is not None:
        found = [f for f in found if module in os.path.basename(f)]
    if not found:
        raise FileNotFoundError(f"{directory}: no *after_optimizations.txt file"
                                + (f" for module {module}" if module else ""))
    optimized = max(found, key=os.path.getsize)
    assignment = optimized[:-len(".txt")] + "-buffer-assignment.txt"
    if not os.path.exists(assignment):
        raise FileNotFoundError(f"{assignment}: no buffer assignment beside the module")
    return optimized, assignment


def compile_for_memory(text: str, *, dialect: str = "mlir", timeout: float = 300.0,
                       module: str | None = None) -> XlaMemory:
    """Compile ``text`` on XLA:CPU in a child process; see the module docstring."""
    directory = tempfile.mkdtemp(prefix="hloref-memory-")
    job = pickle.dumps({"text": text, "dialect": dialect, "dump": directory})
    env = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    try:
        proc = subprocess.run([sys.executable, "-m", "hloref.fuzz.memory_xla"], input=job,
                              capture_output=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise XlaMemoryError(f"XLA:CPU did not compile the module in {timeout:g} s") from None
    if proc.returncode != 0:
        tail = proc.stderr.decode(errors="replace").strip().splitlines()[-5:]
        raise XlaMemoryError(f"the XLA:CPU compile process exited with status "
                             f"{proc.returncode}: " + " | ".join(tail))
    reply = pickle.loads(proc.stdout)
    if "error" in reply:
        raise XlaMemoryError(reply["error"])
    optimized_path, assignment_path = read_dump(directory, module)
    with open(optimized_path, encoding="utf-8") as f:
        optimized = f.read()
    with open(assignment_path, encoding="utf-8") as f:
        assignment = f.read()
    return XlaMemory(optimized, assignment, reply["stats"], optimized_path, assignment_path)


def audit_hlo_text(text: str, args: list | None = None, *, timeout: float = 300.0):
    """The memory audit (``hloref.memory_audit.MemoryAudit``) of what XLA:CPU compiles
    HLO module ``text`` to; ``args``: the module's arguments, for the evaluation through
    the assignment (XLA keeps the entry parameters, in order)."""
    import hloref
    from hloref.buffer_assignment import parse_buffer_assignment
    from hloref.memory_audit import audit
    xla = compile_for_memory(text, dialect="hlo", timeout=timeout)
    module = hloref.parse(xla.optimized, filename=xla.optimized_path)
    assignment = parse_buffer_assignment(xla.assignment, xla.assignment_path)
    if args is not None and len(args) != len(module.entry.parameters):
        args = None
    return audit(module, assignment=assignment, xla_stats=xla.stats, args=args)


def compile_in_worker(text: str, debug_options: dict | None = None,
                      dialect: str = "hlo") -> dict:
    """(in an oracle worker's child) compile ``text`` with ``--xla_dump_to`` a fresh
    directory: HLO text as the XLA oracle compiles it, or StableHLO text
    (``dialect="mlir"``, as jax lowers it) as jax does; ``{"optimized", "assignment",
    "stats"}``: the dumped optimized module and buffer assignment, and
    ``memory_analysis()``'s figures. XLA's refusal raises (the worker answers it as a
    verdict)."""
    import shutil

    directory = tempfile.mkdtemp(prefix="hloref-memory-")
    try:
        if dialect == "hlo":
            from hloref.fuzz.oracles.xla import XlaExecutable
            options = {**(debug_options or {}), "xla_dump_to": directory,
                       "xla_dump_large_constants": True}
            # not the oracle's cache: a compile of its own
            stats = XlaExecutable(text, options).compiled_memory_stats()
        else:
            stats = _compile_mlir(text, directory)
        optimized_path, assignment_path = read_dump(directory)
        with open(optimized_path, encoding="utf-8") as f:
            optimized = f.read()
        with open(assignment_path, encoding="utf-8") as f:
            assignment = f.read()
        return {"optimized": optimized, "assignment": assignment, "stats": stats_of(stats)}
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _compile_mlir(text: str, directory: str):
    """Compile StableHLO ``text`` on XLA:CPU as jax does, dumping into ``directory``;
    the executable's ``CompiledMemoryStats``."""
    from jax.extend import backend as jb
    from jaxlib import xla_client as xc
    be = jb.get_backend("cpu")
    opts = xc.CompileOptions()
    # large constants printed in full, so that the dumped module can be evaluated
    opts.env_option_overrides = [("xla_dump_to", directory), ("xla_dump_large_constants", True)]
    return be.compile_and_load(text, be.local_devices()[:1], opts).get_compiled_memory_stats()


def _child() -> None:
    """(child) read the job from stdin, compile, write the reply to stdout."""
    job = pickle.loads(sys.stdin.buffer.read())
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write to the reply
    try:
        text = job["text"]
        if job["dialect"] == "hlo":
            import jaxlib._jax as jaxmod
            from jaxlib import xla_client as xc
            proto = xc.hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto()
            text = jaxmod.mlir.hlo_to_stablehlo(proto)
        reply = {"stats": stats_of(_compile_mlir(text, job["dump"]))}
    except Exception as exc:  # noqa: BLE001 - XLA's refusal is the answer
        reply = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
    out.write(pickle.dumps(reply))
    out.flush()


if __name__ == "__main__":
    _child()
