"""Sampling the envelope: the nominal run and ``policy.samples`` perturbed runs.

``sample`` evaluates a module once as written (the *nominal* run, which also records
each accumulation's budget) and ``policy.samples`` times with a ``Perturber`` as the
interpreter's ``perturb`` hook; ``sample_program`` does the same for a program that
is several interpreter runs (``RunHooks``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hloref.ir import Module

from .freedoms import EnvelopePolicy
from .lockstep import lockstep_supported, run_lockstep
from .perturb import Perturber

__all__ = ["Sampled", "RunHooks", "sample_program", "sample_lockstep", "sample",
           "LOCKSTEP_GROUP", "LOCKSTEP_MAX_ELEMENTS"]


@dataclass
class Sampled:
    """The nominal result, the perturbed results, and (when recorded) the values of
    each entry instruction in the nominal and the perturbed runs."""

    nominal: object
    samples: list
    entry_nominal: dict = field(default_factory=dict)
    entry_samples: dict = field(default_factory=dict)  # name -> list of values
    seconds: float = 0.0
    #: the largest finite magnitude an accumulation of the program reached in the nominal
    #: run, as a fraction of its type's largest finite value (``Perturber._record_peak``)
    peak: float = 0.0
    #: per perturbed run, the XLA rewrites it took (``rewrites.RewriteRun.applied``)
    rewrites: list = field(default_factory=list)


class RunHooks:
    """The hooks of one run (the nominal one, ``index=None``, or perturbed run
    ``index``) of a program that may be several interpreter runs: one per device, or
    the pieces of a multi-device program. ``perturber(module, key)`` is the ``perturb``
    hook of the piece named ``key`` (its budgets are recorded in the nominal run and
    reused by the same piece in every perturbed run); ``interpreter_options(module,
    key)`` the ``Interpreter`` keyword arguments (the hook and ``op_overrides``)."""

    def __init__(self, policy: EnvelopePolicy, index: int | None, budgets: dict,
                 seed: np.random.SeedSequence | None = None, shared: dict | None = None):
        import threading
        self.policy, self.index, self.seed = policy, index, seed
        self._budgets = budgets
        self.shared = shared if shared is not None else {}
        self._lock = threading.Lock()
        self._perturbers: list = []

    def rewrites(self) -> frozenset:
        """The XLA rewrites this run's perturbers took."""
        return frozenset(n for p in self._perturbers if p.rewrites is not None
                         for n in p.rewrites.applied)

    def perturber(self, module: Module, key: str = "") -> Perturber:
        import zlib
        with self._lock:
            budgets = self._budgets.setdefault(key, {})
        freedoms = self.policy.freedoms
        if self.index is None:
            return Perturber(module, freedoms, None, budgets, shared=self.shared)
        seed = self.seed if not key else np.random.SeedSequence(
            self.seed.entropy, spawn_key=tuple(self.seed.spawn_key) + (zlib.crc32(key.encode()),))
        perturber = Perturber(module, freedoms, np.random.default_rng(seed), budgets,
                              schedule=(self.policy.seed, self.index, self.policy.samples),
                              shared=self.shared)
        with self._lock:
            self._perturbers.append(perturber)
        return perturber

    def interpreter_options(self, module: Module, key: str = "") -> dict:
        options = {"perturb": self.perturber(module, key)}
        if self.index is not None and self.policy.freedoms.accumulation:
            # a perturbed run sums f32 dots in f32 (as XLA does): its error is far inside
            # the accumulation freedom the run adds anyway, and BLAS sgemm is twice
            # dgemm's speed
            options["op_overrides"] = {"dot": {"accumulate": "native"}}
        return options


def sample_program(run, policy: EnvelopePolicy | None = None) -> Sampled:
    """The nominal and ``policy.samples`` perturbed values of a program that ``run(hooks)``
    evaluates, giving each interpreter it starts ``hooks.interpreter_options(module,
    key)`` (``RunHooks``): for programs that are more than one interpreter run."""
    import time
    policy = policy or EnvelopePolicy()
    t0 = time.perf_counter()
    budgets: dict = {}
    shared: dict = {}
    out = Sampled(run(RunHooks(policy, None, budgets, shared=shared)), [])
    seeds = np.random.SeedSequence(policy.seed).spawn(policy.samples)
    for k, s in enumerate(seeds):
        hooks = RunHooks(policy, k, budgets, s, shared=shared)
        out.samples.append(run(hooks))
        out.rewrites.append(hooks.rewrites())
    out.seconds = time.perf_counter() - t0
    out.peak = shared.get("peak", 0.0)
    return out


class _WatchedBudgets(dict):
    """The nominal run's budgets, counting the budgets a perturbed run records (where the
    nominal run recorded none or one of another structure: more loop iterations than
    it). A ``None`` recorded is read as none recorded, and is not counted."""

    writes = 0

    def __setitem__(self, key, value):
        if value is not None:
            self.writes += 1
        super().__setitem__(key, value)


#: How many perturbed runs ``sample_lockstep`` evaluates together: each group holds that
#: many copies of the values that differ between runs. On the 1,609-instruction
#: transformer step (benchmarks/bench_envelope.py, docs/benchmarks.md) 8 took 0.9x the
#: CPU time of 4 and 1.4x its peak bytes; 4 takes less of both than the runs one after
#: another did.
LOCKSTEP_GROUP = 4

#: Lockstep pays the interpreter's and the perturber's cost per instruction once per
#: group, which matters where arrays are small; it holds ``LOCKSTEP_GROUP`` copies of
#: each differing value, which matters where they are large. A module with an array
#: value of more elements than this is sampled run by run. Measured (bench_envelope.py,
#: quiet machine): XLA's bf16 layer norm [160,197,768] (24 million elements) 13.3 CPU s
#: and 2,179 MB in lockstep, 9.5 CPU s and 872 MB run by run; the 2-layer transformer
#: block at 1,024x768 25.3 CPU s and 2,030 MB, 25.8 CPU s and 1,341 MB. The
#: 1,609-instruction step's largest value has 262,144 elements.
LOCKSTEP_MAX_ELEMENTS = 1 << 20


def _largest_array(module: Module) -> int:
    import math

    from hloref.shapes import ArrayShape
    return max((math.prod(i.shape.dims) for _, i in module.instructions()
                if isinstance(i.shape, ArrayShape)), default=0)


def sample_lockstep(module: Module, args: list, policy: EnvelopePolicy | None = None, *,
                    limits=None, group: int | None = None) -> Sampled | None:
    """``sample_program``'s result for one interpreter run of ``module``, its perturbed
    runs evaluated together (``lockstep.run_lockstep``), ``group`` (default
    ``LOCKSTEP_GROUP``) at a time: the same values, bit for bit. None (nothing kept)
    when a perturbed run recorded a budget of its own: later runs read it in the order
    the runs are made one after another, which lockstep does not keep;
    ``sample_program`` then makes them so."""
    import time
    from hloref.evaluator.interpreter import Interpreter
    policy = policy or EnvelopePolicy()
    t0 = time.perf_counter()
    budgets: dict = {}
    shared: dict = {}
    nominal = RunHooks(policy, None, budgets, shared=shared)
    out = Sampled(Interpreter(module, limits=limits, **nominal.interpreter_options(module)
                              ).run(list(args)), [])
    watched = budgets[""] = _WatchedBudgets(budgets.get("", {}))
    seeds = np.random.SeedSequence(policy.seed).spawn(policy.samples)
    hooks = [RunHooks(policy, k, budgets, s, shared=shared) for k, s in enumerate(seeds)]
    options = [h.interpreter_options(module) for h in hooks]
    group = max(1, group or LOCKSTEP_GROUP)
    for start in range(0, len(options), group):
        part = options[start:start + group]
        out.samples += run_lockstep(module, args, [o["perturb"] for o in part],
                                    limits=limits, op_overrides=part[0].get("op_overrides"))
        if watched.writes:
            return None
    out.rewrites = [h.rewrites() for h in hooks]
    out.seconds = time.perf_counter() - t0
    out.peak = shared.get("peak", 0.0)
    return out


def sample(module: Module, args: list, policy: EnvelopePolicy | None = None, *, limits=None,
           record_entry: bool = False, nominal=None) -> Sampled:
    """Evaluate ``module`` once as written and ``policy.samples`` times perturbed."""
    from hloref.evaluator.interpreter import Interpreter
    out = Sampled(None, [])

    def observer_for(hooks: RunHooks):
        if not record_entry:
            return None
        store, many = (out.entry_nominal, False) if hooks.index is None else \
            (out.entry_samples, True)

        def observe(comp, instr, value):
            if comp is module.entry and instr.opcode != "parameter":
                if many:
                    store.setdefault(instr.name, []).append(value)
                else:
                    store[instr.name] = value
        return observe

    def run(hooks: RunHooks):
        return Interpreter(module, limits=limits, observer=observer_for(hooks),
                           **hooks.interpreter_options(module)).run(list(args))

    runs = None
    if not record_entry:
        if lockstep_supported(module) and _largest_array(module) <= LOCKSTEP_MAX_ELEMENTS:
            runs = sample_lockstep(module, list(args), policy, limits=limits)
    if runs is None:
        runs = sample_program(run, policy)
    out.nominal, out.samples, out.seconds = runs.nominal, runs.samples, runs.seconds
    out.peak, out.rewrites = runs.peak, runs.rewrites
    return out
