"""Check JAX functions directly: ``hloref.jax.evaluate`` and ``hloref.jax.check``.

``evaluate(fn, *args, **kwargs)`` lowers ``jax.jit(fn)`` for these arguments, hands
the HLO (``as_text(dialect="hlo")``, before XLA's optimizations) to hloref with the
flattened arguments in parameter order, and returns what ``fn`` returns, in the same
pytree structure, as numpy / ml_dtypes arrays.

``check(fn, *args, **kwargs)`` also runs the compiled function on XLA:CPU (jax's own,
in this process) and compares the two under the shared verdict
(``hloref.fuzz.diff``); it returns a ``FrontendReport``, a ``DiffReport`` with the
pytree path of each mismatching output (``out['logits'][3, 7]``) and, for a mismatch,
the culprit instruction and the first XLA pass that changes the answer.

Arguments:

* ``fn`` may be a plain function or a ``jax.jit``-wrapped one; a jitted function keeps
  its ``static_argnums``/``static_argnames``/``donate_argnums``/``keep_unused``. For a
  plain function, arguments that are not arrays or numbers (strings, callables, other
  Python objects) are made static; pass ``jax.jit(fn, static_argnums=...)`` to make
  numbers static.
* Arguments jit drops as unused (``keep_unused=False``) are not parameters of the
  module; hoisted constants are. PRNG key arrays cross as their ``key_data``
  (``uint32``) and key outputs come back that way.

``memory(fn, *args, **kwargs)`` audits the memory of the compiled function
(``hloref.memory_audit``): XLA:CPU compiles it in a child process, and hloref's liveness,
peak and figures are put beside ``memory_analysis()``'s, its buffer assignment checked
and the optimized module evaluated through it on these arguments.

``program(fn, *args, **kwargs)`` returns the ``JaxProgram`` both use (``.text``,
``.module``, ``.inputs``, ``.evaluate(limits=...)``, ``.run_xla()``,
``.check(blame=..., worker=...)``).

Multi-device computations (``pmap``, ``shard_map`` over several devices) run on
simulated devices (``hloref._manual``) and are judged by the numerical envelope
(``check_devices``); a jit that XLA's SPMD partitioner splits across devices raises
``HloUnsupportedError``.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

__all__ = ["evaluate", "check", "memory", "program", "JaxProgram", "hlo_text",
           "hlo_text_from_bytecode", "suspended"]

_local = threading.local()


@contextmanager
def suspended():
    """While active (in this thread), the pytest plugin does not record executions:
    ``check`` runs XLA itself and checks the result once."""
    prev = getattr(_local, "suspended", False)
    _local.suspended = True
    try:
        yield
    finally:
        _local.suspended = prev


def is_suspended() -> bool:
    return getattr(_local, "suspended", False)


def hlo_text(stablehlo_module) -> str:
    """HLO text of a StableHLO ``ir.Module`` as jax lowers it (``Lowered.as_text(dialect=
    "hlo")``), with flat (untupled) parameters."""
    from jax._src.interpreters import mlir
    return hlo_text_from_bytecode(mlir.module_to_bytecode(stablehlo_module))


def hlo_text_from_bytecode(bytecode: bytes) -> str:
    """``hlo_text`` of a module serialized as StableHLO bytecode (``jax._src.interpreters.
    mlir.module_to_bytecode``); imports jaxlib, not jax (the pytest plugin's checking
    process converts what the test's process serialized)."""
    from jaxlib import _jax
    try:
        from jaxlib import _hlo as hlo
    except ImportError:  # older jaxlib: the printer options live in _jax
        hlo = _jax
    comp = _jax.mlir.mlir_module_to_xla_computation(bytecode, use_tuple_args=False)
    return comp.as_hlo_module().to_string(hlo.HloPrintOptions.short_parsable())


def _issubdtype(x, kind) -> bool:
    import jax
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        return False
    try:
        return bool(jax.dtypes.issubdtype(dtype, kind))
    except TypeError:
        return False


def is_key(x) -> bool:
    """A typed PRNG key array."""
    import jax
    return _issubdtype(x, jax.dtypes.prng_key)


def to_numpy(x, dtype=None) -> np.ndarray:
    """A host copy of a JAX value as the module sees it: key arrays as their key data,
    float0 (the tangent type of integers) as the ``pred`` zeros XLA holds for it.
    Other extended dtypes raise ``HloUnsupportedError``."""
    import jax
    if is_key(x):
        x = jax.random.key_data(x)
    elif _issubdtype(x, jax.dtypes.extended):
        from .errors import HloUnsupportedError
        raise HloUnsupportedError("parameter", "cpu", f"a value of extended dtype {x.dtype} "
                                  "(only PRNG keys are converted)")
    elif not isinstance(x, (jax.Array, np.ndarray, np.generic, bool, int, float, complex)):
        from .errors import HloUnsupportedError
        raise HloUnsupportedError("parameter", "cpu", f"a value of type {type(x).__name__} "
                                  "(not an array)")
    if getattr(x, "dtype", None) == jax.dtypes.float0:
        return np.zeros(np.shape(x), dtype=np.bool_)
    if dtype is not None and not isinstance(x, (np.ndarray, jax.Array)):
        return np.array(x, dtype=dtype)
    arr = np.array(x)
    if dtype is not None and arr.dtype != dtype:
        arr = arr.astype(dtype)
    return arr


def _is_array_like(leaf) -> bool:
    import jax
    return isinstance(leaf, (jax.Array, np.ndarray, np.generic, bool, int, float, complex)) or \
        hasattr(leaf, "__jax_array__")


def _jitted(fn, args, kwargs):
    import jax
    if hasattr(fn, "lower") and hasattr(fn, "_jit_info"):
        return fn
    static_argnums = tuple(i for i, a in enumerate(args)
                           if not all(_is_array_like(x) for x in jax.tree_util.tree_leaves(a)))
    static_argnames = tuple(k for k, a in kwargs.items()
                            if not all(_is_array_like(x) for x in jax.tree_util.tree_leaves(a)))
    return jax.jit(fn, static_argnums=static_argnums, static_argnames=static_argnames)


def _fn_name(fn) -> str:
    f = getattr(fn, "_fun", fn)
    return getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or repr(f)


def output_names(out_tree, prefix: str = "out") -> list[str]:
    """``out['logits']``, ``out[1][0]``... for each leaf of ``out_tree``."""
    import jax
    n = out_tree.num_leaves
    skeleton = jax.tree_util.tree_unflatten(out_tree, list(range(n)))
    names = [f"{prefix}[{i}]" for i in range(n)]
    for path, i in jax.tree_util.tree_flatten_with_path(skeleton)[0]:
        names[i] = prefix + jax.tree_util.keystr(path)
    return names


@dataclass
class JaxProgram:
    """One ``jax.jit`` computation specialised to its arguments."""

    fn: object
    args: tuple
    kwargs: dict
    text: str
    module: object
    inputs: list  # one numpy value per entry parameter (None for tokens)
    out_tree: object
    out_avals: list = field(default_factory=list)
    name: str = ""
    #: devices the computation runs on (a shard_map/pmap when > 1: see ``hloref._manual``)
    devices: int = 1

    @property
    def output_names(self) -> list[str]:
        return output_names(self.out_tree)

    def unflatten(self, flat: list):
        import jax
        return jax.tree_util.tree_unflatten(self.out_tree, list(flat))

    def evaluate_flat(self, *, limits=None) -> list:
        import hloref
        from ._frontend import flat_result
        if self.devices > 1:
            from ._manual import evaluate_manual
            value = evaluate_manual(self.module, self.inputs, limits=limits)
        else:
            value = hloref.evaluate(self.module, *self.inputs, limits=limits)
        return flat_result(self.module, value)

    def evaluate(self, *, limits=None):
        """hloref's value, in ``fn``'s output structure."""
        return self.unflatten(self.evaluate_flat(limits=limits))

    def run_xla_flat(self) -> list:
        """Run the jitted function on XLA (jax's default backend, XLA:CPU here) with the
        same arguments; the flat outputs as numpy arrays."""
        with suspended():
            out = self.fn(*self.args, **self.kwargs)
        leaves = self.out_tree.flatten_up_to(out)
        return [to_numpy(x) for x in leaves]

    def run_xla(self):
        return self.unflatten(self.run_xla_flat())

    def check(self, *, blame: bool = True, worker=None, limits=None, localize: bool = True,
              oracle_flat: list | None = None):
        """The shared verdict: hloref against XLA's outputs (``oracle_flat``, default: run
        the function now). Returns a ``FrontendReport``."""
        from hloref.shapes import TupleShape
        from ._frontend import check_values, flat_result
        flat = self.run_xla_flat() if oracle_flat is None else list(oracle_flat)
        # tokens in the result (ordered effects) are not leaves of the output tree
        value = tuple(result_with_tokens(self.module, flat)) if isinstance(
            self.module.entry.root.shape, TupleShape) else flat[0]
        if self.devices > 1:
            report = check_manual(self, value, limits=limits)
        else:
            report = check_values(self.module, self.inputs, value, oracle="xla",
                                  names=self.output_names, text=self.text, worker=worker,
                                  limits=limits, localize=localize, blame=blame)
        report.function = self.name
        report.oracle_value = self.unflatten(flat)
        if report.expected is not None:
            try:
                report.value = self.unflatten(flat_result(self.module, report.expected))
            except Exception:  # noqa: BLE001 - structure mismatch is in the report already
                report.value = report.expected
        return report


def check_manual(prog: "JaxProgram", oracle_value, *, limits=None):
    """The verdict for a multi-device (shard_map/pmap) computation: see ``check_devices``."""
    return check_devices(prog.module, prog.inputs, oracle_value, devices=prog.devices,
                         names=prog.output_names, text=prog.text, function=prog.name,
                         limits=limits)


def check_devices(module, inputs: list, oracle_value, *, devices: int, names: list,
                  text: str = "", function: str = "", limits=None, policy=None):
    """hloref's global value of a shard_map/pmap module (``hloref._manual``) against XLA's,
    under the same numerical envelope as ``hloref diff``: the program (the per-device
    body on every simulated device, and the global-view instructions around it) is run
    once as written and ``policy.samples`` times perturbed, every interpreter with its
    perturbation hook. No isolation or pass blame for multi-device modules: a
    difference is a ``mismatch`` with the outputs outside their envelope."""
    import time

    from hloref.fuzz.compare import compare_values
    from hloref.fuzz.differential import DiffReport
    from hloref.fuzz.envelope import Envelope, EnvelopePolicy
    from hloref.fuzz.sampling import sample_program
    from ._frontend import frontend_report, flat_result, format_index
    from .errors import HloError
    from ._manual import evaluate_manual
    t0 = time.perf_counter()
    policy = policy or EnvelopePolicy()
    try:
        runs = sample_program(
            lambda hooks: evaluate_manual(module, inputs, limits=limits, hooks=hooks), policy)
    except HloError as exc:
        verdict = "unsupported" if type(exc).__name__ == "HloUnsupportedError" else "error"
        return frontend_report(DiffReport(verdict, "xla", message=f"hloref: {exc}"),
                               function=function, hlo_text=text, inputs=list(inputs))
    seconds = time.perf_counter() - t0
    ours = runs.nominal
    env = Envelope(ours, runs.samples, policy, module, peak=runs.peak)
    tupled = isinstance(ours, tuple)
    theirs = tuple(oracle_value) if tupled else oracle_value
    mismatches = []
    for path, v in env.check_each(theirs):
        if not v.ok:
            i = path[0] if path else 0
            name = names[i] if i < len(names) else f"out[{i}]"
            mismatches.append((format_index(name, v.index), v))
    verdict = env.check(theirs)
    try:
        comparison = compare_values(theirs, ours)
    except Exception:  # noqa: BLE001 - a structure the plain policy cannot compare
        comparison = None
    message = f"{devices} devices (shard_map): the envelope of {policy.samples} perturbed runs"
    report = DiffReport("mismatch" if mismatches else "match", "xla", message=message,
                        comparison=comparison, envelope=verdict,
                        expected=ours, actual=oracle_value, hloref_seconds=seconds,
                        policy=policy)
    return frontend_report(report, mismatches=mismatches, hlo_text=text, inputs=list(inputs),
                           output_names=list(names), function=function)


def result_with_tokens(module, flat: list) -> list:
    """The leaves of ``module``'s tuple result from XLA's flat outputs, which leave out
    tokens: ``TOKEN_VALUE`` where the root tuple has a token."""
    from hloref.shapes import TokenShape
    from hloref.values import TOKEN_VALUE
    shapes = module.entry.root.shape.elements
    it = iter(flat)
    return [TOKEN_VALUE if isinstance(s, TokenShape) else next(it) for s in shapes]


def program(fn, *args, **kwargs) -> JaxProgram:
    """Lower ``jax.jit(fn)`` for these arguments: the HLO text, the hloref module, the
    parameter values in order, and the output tree."""
    import hloref
    from jax._src import pjit
    from .errors import HloUnsupportedError
    jitted = _jitted(fn, args, kwargs)
    with suspended():
        lowered = jitted.lower(*args, **kwargs)
        _, args_flat = pjit._infer_params(jitted._fun, jitted._jit_info, args, kwargs)
    lowering = lowered._lowering
    cargs = lowering.compile_args
    if cargs.get("mut") is not None:
        raise HloUnsupportedError("jit", "cpu", "mutable array references")
    text = hlo_text(lowering.stablehlo())
    module = hloref.parse(text)
    devices = cargs.get("num_devices", 1)
    if devices > 1:
        from ._manual import is_manual
        if not is_manual(module):
            raise HloUnsupportedError("jit", "cpu", "a computation over several devices that "
                                      "is not a shard_map/pmap (XLA's SPMD partitioner decides "
                                      "its per-device code)")
    full = [*lowering.const_args, *args_flat]
    kept = sorted(cargs["kept_var_idx"])
    values = [full[i] for i in kept]
    from hloref.shapes import ArrayShape, TokenShape
    params = [p for p in module.entry.parameters if not isinstance(p.shape, TokenShape)]
    if len(params) != len(values):
        raise HloUnsupportedError("parameter", "cpu", f"the module has {len(params)} "
                                  f"parameters, jit passes {len(values)} arguments")
    inputs = []
    for v, p in zip(values, params):
        dtype = p.shape.element_type.dtype if isinstance(p.shape, ArrayShape) else None
        inputs.append(to_numpy(v, dtype))
    from ._frontend import inputs_with_tokens
    inputs = inputs_with_tokens(module, inputs)
    return JaxProgram(jitted, args, kwargs, text, module, inputs, lowered.out_tree,
                      list(cargs.get("global_out_avals", [])), _fn_name(jitted), devices)


def evaluate(fn, *args, **kwargs):
    """hloref's value of ``jax.jit(fn)(*args, **kwargs)``, in the pytree structure ``fn``
    returns, as numpy / ml_dtypes arrays."""
    return program(fn, *args, **kwargs).evaluate()


def check(fn, *args, **kwargs):
    """Run ``jax.jit(fn)`` on XLA:CPU and compare with hloref under the shared verdict.

    Returns a ``FrontendReport``: ``verdict`` (match, mismatch, known-gap, unsupported,
    error...), ``comparison``, ``culprit``, ``blamed_pass``, ``paths`` (the pytree path
    of each mismatching output, e.g. ``out['logits'][3, 7]``), ``value`` (hloref's) and
    ``oracle_value`` (XLA's), both in ``fn``'s output structure; ``summary()``."""
    from .errors import HloError
    try:
        prog = program(fn, *args, **kwargs)
    except HloError as exc:
        from hloref.fuzz.differential import DiffReport
        from ._frontend import frontend_report
        verdict = "unsupported" if type(exc).__name__ == "HloUnsupportedError" else "error"
        return frontend_report(DiffReport(verdict, "xla", message=f"hloref: {exc}"),
                               function=_fn_name(fn))
    return prog.check()


def memory(fn, *args, **kwargs):
    """The memory audit of ``jax.jit(fn)`` for these arguments: a ``MemoryAudit``
    (``peak``, ``peak_instruction``, ``rows`` beside ``memory_analysis()``, ``check``,
    ``arena``, ``findings``, ``summary()``). XLA:CPU compiles the function (its StableHLO,
    so donation is kept) in a child process: XLA aborting raises
    ``hloref.fuzz.memory_xla.XlaMemoryError``, not the end of this process."""
    import hloref
    from hloref.fuzz.memory_xla import compile_for_memory
    from .buffer_assignment import parse_buffer_assignment
    from .memory_audit import audit
    prog = program(fn, *args, **kwargs)
    with suspended():
        mlir = prog.fn.lower(*args, **kwargs).as_text()
    xla = compile_for_memory(mlir)
    module = hloref.parse(xla.optimized, filename=xla.optimized_path)
    assignment = parse_buffer_assignment(xla.assignment, xla.assignment_path)
    inputs = prog.inputs if len(prog.inputs) == len(module.entry.parameters) else None
    return audit(module, assignment=assignment, xla_stats=xla.stats, args=inputs)

