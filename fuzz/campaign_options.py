"""Fuzz campaign settings (``fuzz/campaign.py`` runs them): the options
(``CampaignOptions``, ``--time`` parsed by ``parse_duration``), the XLA:CPU compile
presets of ``--xla-opt`` (``XLA_OPT_PRESETS``, ``xla_debug_options``), the Hypothesis
example database ``--db``/``--db-github`` name (``database``), the workers' seeds
(``hash_seed``), and the error a campaign that cannot start raises
(``CampaignSetupError``)."""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass

__all__ = ["CampaignOptions", "CampaignSetupError", "XLA_OPT_PRESETS", "xla_debug_options",
           "database", "hash_seed", "parse_duration"]


class CampaignSetupError(RuntimeError):
    """The campaign cannot start as asked (Ray or redis missing, no cluster at the
    address...); the command line prints the message, no traceback."""


@dataclass
class CampaignOptions:
    out: str = "fuzz-findings"
    oracles: tuple = ("xla",)
    seed: int = 0
    examples: int | None = None
    seconds: float | None = None
    workers: int = 1
    ops: list | None = None
    db: str | None = None
    db_github: str | None = None
    max_instructions: int = 12
    timeout: float = 60.0
    #: programs compiled and run by the oracle as one module (1: each alone)
    batch: int = 16
    #: Hypothesis examples (each ``batch`` programs) per Hypothesis run (each run starts
    #: with the simplest example, a repeat after the first run)
    examples_per_run: int = 8
    blame: bool = True
    progress_every: float = 10.0
    json_summary: str | None = None
    junit: str | None = None
    worker_factory: object = None  # tests: callable(oracle) -> an OracleWorker-like object
    quiet: bool = False
    #: Ray: the address ``ray.init`` gets (``auto``, ``ray://host:10001``, ``host:6379``)
    ray: str | None = None
    #: Ray: programs per unit of work handed to an actor (a unit is re-run when its
    #: actor dies)
    unit_programs: int = 128
    #: XLA:CPU compile settings (``XLA_OPT_PRESETS``): ``default`` is what XLA's users
    #: get; ``fast`` compiles with LLVM at -O0, see ``XLA_OPT_PRESETS``
    xla_opt: str = "default"
    #: ``--types``: the element types generated programs use (``None``: all)
    element_types: tuple | None = None
    #: mutants of real programs, pass coverage, a target pass (``fuzz/reach.py``)
    reach: object = None
    #: ``--memory-audit-every N``: audit the memory of every N-th program (0: none;
    #: ``fuzz/memory_campaign.py``)
    memory_audit_every: int = 0
    #: tests: callable(optimized module, BufferAssignment) that may corrupt the
    #: assignment before the memory audit reads it (True when it did)
    memory_corrupt: object = None


#: ``--xla-opt``: the debug options every XLA:CPU compile of the campaign gets (batches,
#: programs alone, localisation, reduction; findings record them). ``fast`` sets
#: ``xla_backend_optimization_level=0``: XLA:CPU then builds LLVM's O0 pipeline
#: instead of O2 (no IR optimization: no instcombine, GVN, loop or SLP vectorization,
#: inlining) and generates machine code at ``CodeGenOptLevel::None`` (no optimizing
#: instruction selection and register allocation): bugs there are not looked for. The
#: HLO passes and XLA's own fusion emitters are the same (checked: the optimized HLO
#: of the benchmark's programs is identical), but values can differ beyond rounding
#: (a dilated convolution's 0*inf taps: -inf at XLA's default, NaN at -O0). About a
#: quarter less compile time (``benchmarks/bench_oracle_compile.py``).
XLA_OPT_PRESETS = {"default": {}, "fast": {"xla_backend_optimization_level": 0}}


def xla_debug_options(opts: "CampaignOptions", oracle: str) -> dict:
    """The debug options ``--xla-opt`` gives every compile of ``oracle`` (``{}``: XLA's
    defaults)."""
    if opts.xla_opt not in XLA_OPT_PRESETS:
        raise CampaignSetupError(f"--xla-opt {opts.xla_opt}: expected one of "
                                 f"{', '.join(XLA_OPT_PRESETS)}")
    return dict(XLA_OPT_PRESETS[opts.xla_opt]) if oracle == "xla" else {}


def database(opts: CampaignOptions):
    """The Hypothesis example database the options name (``None`` without ``--db``)."""
    from hypothesis.database import (DirectoryBasedExampleDatabase, GitHubArtifactDatabase,
                                     MultiplexedDatabase, ReadOnlyDatabase)
    if not opts.db and not opts.db_github:
        return None
    if opts.db and opts.db.startswith(("redis://", "rediss://", "unix://")):
        try:
            import redis
            from hypothesis.extra.redis import RedisExampleDatabase
        except ImportError as exc:
            raise CampaignSetupError(f"--db {opts.db} needs the redis package ({exc}); "
                               "pip install redis") from None
        local = RedisExampleDatabase(redis.Redis.from_url(opts.db))
    else:
        local = DirectoryBasedExampleDatabase(opts.db or os.path.join(opts.out, ".hypothesis"))
    if opts.db_github:
        owner, _, repo = opts.db_github.partition("/")
        return MultiplexedDatabase(local, ReadOnlyDatabase(GitHubArtifactDatabase(
            owner, repo, artifact_name="hloref-fuzz-db")))
    return local


def hash_seed(*parts) -> int:
    return int(hashlib.sha256(repr(parts).encode()).hexdigest()[:8], 16)


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``10m``, ``1h30m`` → seconds."""
    text = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    total, pos = 0.0, 0
    for m in re.finditer(r"(\d+(?:\.\d+)?)([hms])", text):
        if m.start() != pos:
            raise ValueError(f"bad duration {text!r}")
        total += float(m.group(1)) * {"h": 3600, "m": 60, "s": 1}[m.group(2)]
        pos = m.end()
    if pos != len(text) or not text:
        raise ValueError(f"bad duration {text!r} (use e.g. 90s, 10m, 1h)")
    return total
