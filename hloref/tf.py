"""Check TensorFlow functions directly: ``hloref.tf.evaluate`` and ``hloref.tf.check``.

For a ``tf.function(jit_compile=True)``:

``evaluate(fn, *args, **kwargs)`` takes the HLO TensorFlow hands to XLA for these
arguments (``fn.experimental_get_compiler_ir(*args, **kwargs)(stage="hlo")``),
evaluates it with hloref on the flattened tensor arguments followed by the captured
values (variables, captured tensors), in parameter order, and returns what ``fn``
returns, in the same nested structure, as numpy / ml_dtypes arrays.

``check(fn, *args, **kwargs)`` also calls ``fn`` (TensorFlow's own XLA:CPU compiles
and runs it) and compares the two values under the shared verdict; it returns a
``FrontendReport`` (a ``DiffReport`` with the path of each output outside the
envelope, ``out['logits'][3, 7]``; localisation runs on the ``tf`` oracle).

A function that assigns variables returns their new values as extra results of the
module; they are compared with the variables' values after the call (``check``)
when it is clear which variables they are. ``evaluate`` leaves variables alone.

Python values among the arguments (numbers, strings) are part of TensorFlow's trace,
as ``tf.function`` makes them; arguments a function declares with defaults may be
omitted (TensorFlow 2.21's own ``experimental_get_compiler_ir`` does not fill them in;
this module does).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

__all__ = ["evaluate", "check", "program", "TfProgram"]


def _tf():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    return tf


def _numpy(t) -> np.ndarray:
    value = t.numpy() if hasattr(t, "numpy") else t
    return np.array(value)


def _bind(fn, args, kwargs):
    """``args``/``kwargs`` with the function's defaults filled in."""
    from tensorflow.python.eager.polymorphic_function import function_type_utils as ftu
    try:
        bound = ftu.canonicalize_function_inputs(args, kwargs, fn._function_type,
                                                 fn._default_values)
        return tuple(bound.args), dict(bound.kwargs)
    except Exception:  # noqa: BLE001 - TF's own binding will say what is wrong
        return tuple(args), dict(kwargs)


def output_names(structure, prefix: str = "out") -> list[str]:
    """``out['y']``, ``out['z'][0]``... for each leaf of a ``tf.nest`` structure, in
    ``tf.nest.flatten`` order (dict keys sorted)."""
    from tensorflow.python.util import nest
    names = []
    for path, _ in nest.flatten_with_tuple_paths(structure, expand_composites=True):
        names.append(prefix + "".join(f"[{p!r}]" if isinstance(p, str) else f"[{p}]"
                                      for p in path))
    return names


@dataclass
class TfProgram:
    """One ``tf.function(jit_compile=True)`` specialised to its arguments."""

    fn: object
    args: tuple
    kwargs: dict
    text: str
    module: object
    inputs: list  # one numpy value per entry parameter
    structure: object  # the concrete function's structured outputs
    tensor_leaves: list  # for each output leaf: is it a tensor (an HLO result)?
    constants: list  # the non-tensor output leaves, in order
    variables: list = field(default_factory=list)  # captured variables, parameter order
    name: str = ""
    assigned: list = field(default_factory=list)  # variables the last call assigned

    @property
    def output_names(self) -> list[str]:
        names = output_names(self.structure)
        return [n for n, t in zip(names, self.tensor_leaves) if t]

    def _pack(self, flat_tensors: list):
        tf = _tf()
        it, consts = iter(flat_tensors), iter(self.constants)
        leaves = [next(it) if t else next(consts) for t in self.tensor_leaves]
        return tf.nest.pack_sequence_as(self.structure, leaves, expand_composites=True)

    def evaluate_flat(self, *, limits=None) -> list:
        """hloref's value of every result of the module (outputs, then variables the
        function assigns)."""
        import hloref
        from ._frontend import flat_result
        return flat_result(self.module, hloref.evaluate(self.module, *self.inputs,
                                                        limits=limits))

    def evaluate(self, *, limits=None):
        n = sum(self.tensor_leaves)
        return self._pack(self.evaluate_flat(limits=limits)[:n])

    def run_tf_flat(self) -> list:
        """Call the function (TensorFlow's XLA); its flat tensor outputs, then the new
        values of the variables it assigned, as numpy arrays."""
        tf = _tf()
        before = [(v, _numpy(v.read_value())) for v in self.variables]
        out = self.fn(*self.args, **self.kwargs)
        leaves = tf.nest.flatten(out, expand_composites=True)
        flat = [_numpy(x) for x, t in zip(leaves, self.tensor_leaves) if t]
        extra = len(self._result_leaves()) - len(flat)
        self.assigned = self._assigned(extra, before) if extra > 0 else []
        return flat + [_numpy(v.read_value()) for v in self.assigned]

    def _result_leaves(self) -> list:
        from hloref.shapes import TupleShape
        root = self.module.entry.root.shape
        return list(root.elements) if isinstance(root, TupleShape) else [root]

    def _assigned(self, extra: int, before: list) -> list:
        """The variables whose new values are the module's ``extra`` last results: all
        of them, or the ones whose values changed when exactly that many did."""
        from .errors import HloUnsupportedError
        if extra == len(self.variables):
            return list(self.variables)
        changed = [v for v, old in before if not np.array_equal(
            _numpy(v.read_value()), old, equal_nan=True)]
        if len(changed) == extra:
            return changed
        raise HloUnsupportedError("parameter", "cpu", f"the function assigns {extra} of its "
                                  f"{len(self.variables)} variables and it is not clear which")

    def check(self, *, worker=None, limits=None, localize: bool = True, blame: bool = False,
              oracle_flat: list | None = None):
        """The shared verdict: hloref against TensorFlow's XLA (``oracle_flat``, default:
        call the function now). Returns a ``FrontendReport``."""
        from hloref.shapes import TupleShape
        from ._frontend import check_values
        flat = self.run_tf_flat() if oracle_flat is None else list(oracle_flat)
        value = tuple(flat) if isinstance(self.module.entry.root.shape, TupleShape) else flat[0]
        n = sum(self.tensor_leaves)
        assigned = self.assigned if oracle_flat is None else []
        names = self.output_names + [f"variable {v.name}" for v in assigned]
        names += [f"out[{i}]" for i in range(len(names), len(flat))]
        report = check_values(self.module, self.inputs, value, oracle="tf", names=names,
                              text=self.text, worker=worker, limits=limits, localize=localize,
                              blame=blame)
        report.function = self.name
        report.oracle_value = self._pack(flat[:n])
        if report.expected is not None:
            from ._frontend import flat_result
            try:
                report.value = self._pack(flat_result(self.module, report.expected)[:n])
            except Exception:  # noqa: BLE001
                report.value = report.expected
        return report


def program(fn, *args, **kwargs) -> TfProgram:
    """The HLO TensorFlow compiles ``fn`` (a ``tf.function(jit_compile=True)``) to for
    these arguments, the hloref module, the parameter values, the output structure."""
    tf = _tf()
    import hloref
    from tensorflow.python.eager.polymorphic_function import function_type_utils as ftu
    from .errors import HloUnsupportedError
    from hloref.shapes import ArrayShape
    if not hasattr(fn, "experimental_get_compiler_ir"):
        raise TypeError("hloref.tf takes a tf.function(jit_compile=True)")
    args, kwargs = _bind(fn, args, kwargs)
    text = fn.experimental_get_compiler_ir(*args, **kwargs)(stage="hlo")
    module = hloref.parse(text)
    concrete = fn.get_concrete_function(*args, **kwargs)
    bound = ftu.canonicalize_function_inputs(args, kwargs, concrete.function_type)
    flat = list(concrete.function_type.unpack_inputs(bound))
    by_handle = {id(v.handle): v for v in concrete.variables}
    variables, captured = [], []
    for c in concrete.captured_inputs:
        if c.dtype == tf.resource:
            v = by_handle.get(id(c))
            if v is None:
                raise HloUnsupportedError("parameter", "cpu", "a captured resource that is not "
                                          "a variable")
            variables.append(v)
            captured.append(v.read_value())
        else:
            captured.append(c)
    values = flat + captured
    params = module.entry.parameters
    if len(params) != len(values):
        raise HloUnsupportedError("parameter", "cpu", f"the module has {len(params)} "
                                  f"parameters, the function passes {len(values)} values")
    inputs = []
    for v, p in zip(values, params):
        arr = _numpy(v)
        if isinstance(p.shape, ArrayShape) and arr.dtype != p.shape.element_type.dtype:
            arr = arr.astype(p.shape.element_type.dtype)
        inputs.append(arr)
    structure = concrete.structured_outputs
    leaves = tf.nest.flatten(structure, expand_composites=True)
    is_tensor = [isinstance(x, (tf.Tensor, tf.Variable)) for x in leaves]
    constants = [x for x, t in zip(leaves, is_tensor) if not t]
    name = getattr(fn, "__name__", None) or getattr(fn, "_name", "") or repr(fn)
    return TfProgram(fn, args, kwargs, text, module, inputs, structure, is_tensor, constants,
                     variables, name)


def evaluate(fn, *args, **kwargs):
    """hloref's value of ``fn(*args, **kwargs)`` (a ``tf.function(jit_compile=True)``), in
    the nested structure ``fn`` returns, as numpy / ml_dtypes arrays."""
    return program(fn, *args, **kwargs).evaluate()


def check(fn, *args, **kwargs):
    """Call ``fn`` on TensorFlow's XLA and compare with hloref under the shared verdict.

    Returns a ``FrontendReport``: ``verdict``, ``comparison``, ``culprit`` (isolation on
    the ``tf`` oracle), ``paths`` (the path of each mismatching output, e.g.
    ``out['logits'][3, 7]``), ``value`` (hloref's) and ``oracle_value`` (TensorFlow's),
    both in ``fn``'s output structure; ``summary()``."""
    from .errors import HloError
    try:
        prog = program(fn, *args, **kwargs)
    except HloError as exc:
        from hloref.fuzz.differential import DiffReport
        from ._frontend import frontend_report
        verdict = "unsupported" if type(exc).__name__ == "HloUnsupportedError" else "error"
        return frontend_report(DiffReport(verdict, "tf", message=f"hloref: {exc}"),
                               function=getattr(fn, "__name__", ""))
    return prog.check()
