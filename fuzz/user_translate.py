"""The walk shared by the JAX and TF user-program translators (fuzz/user_jax.py,
fuzz/user_tf.py): one Python statement per entry instruction, in dependency order.

A translator subclass gives two tables: ``TEMPLATES`` (opcode -> a format string of the
instruction's expression, filled from :func:`fields`: the operands' variable names and the
attributes spelled as the API takes them) and ``SPECIAL`` (opcode -> method, for what a
template cannot say), a ``check(instr)`` hook, and the program's frame (imports,
decorator, how an input literal and a constant are written). It raises :class:`Unexpressible` naming the
op or element type the API cannot write, and calls ``note`` when what it writes computes
the op's value by other HLO instructions than the module's (the API lowers it so), so
that the program does not reach the op itself.

Layouts are not written: the oracles compile through StableHLO, which drops them too.
"""

from __future__ import annotations

import keyword
import re

__all__ = ["Unexpressible", "Translator", "python_name", "fields"]


class Unexpressible(Exception):
    """The user API cannot write the module; the message names the op or type."""


def python_name(name: str) -> str:
    """A Python identifier for an HLO instruction name (``count_leading_zeros.6`` ->
    ``count_leading_zeros_6``)."""
    text = re.sub(r"\W", "_", name)
    if not text or text[0].isdigit() or keyword.iskeyword(text):
        text = "v_" + text
    return text


def fields(instr, args: list[str], seq=tuple) -> dict:
    """What a template may name: ``x``, ``y``, ``z`` (the first operands), ``args``,
    ``rest1``, ``rest2`` (operands joined, from the first, second, third on), ``shape``, and
    the attributes the instruction has (``dims``, ``dim0``, ``starts``/``limits``/``strides``,
    ``low``/``high``/``interior``/``padding_config``, ``sizes``, ``iota_dimension``,
    ``exponent_bits``, ``mantissa_bits``); sequences as ``seq`` makes them."""
    a = instr.attrs
    out = {"x": args[0] if args else "", "y": args[1] if len(args) > 1 else "",
           "z": args[2] if len(args) > 2 else "", "args": ", ".join(args),
           "rest1": ", ".join(args[1:]), "rest2": ", ".join(args[2:])}
    if instr.shape.is_array:
        out["shape"] = seq(instr.shape.dims)
    if "dimensions" in a:
        out["dims"] = seq(a["dimensions"])
        out["dim0"] = a["dimensions"][0] if a["dimensions"] else None
    if "slice" in a:
        out.update(starts=seq(d.start for d in a["slice"]), limits=seq(d.limit for d in a["slice"]),
                   strides=seq(d.stride for d in a["slice"]))
    if "padding" in a and instr.opcode == "pad":
        dims = a["padding"]
        out.update(low=seq(d.low for d in dims), high=seq(d.high for d in dims),
                   interior=seq(d.interior for d in dims),
                   padding_config=[(d.low, d.high, d.interior) for d in dims])
    if "dynamic_slice_sizes" in a:
        out["sizes"] = seq(a["dynamic_slice_sizes"])
    for name in ("iota_dimension", "exponent_bits", "mantissa_bits"):
        if name in a:
            out[name] = a[name]
    if instr.opcode == "convolution":
        out.update(_convolution_fields(instr, seq))
    return out


def _convolution_fields(instr, seq) -> dict:
    """A convolution's window as strides, (low, high) padding pairs and dilations, its
    dimension numbers as ``dn`` (hloref's ConvDimensionNumbers) and as jax's
    ``lhs_spec``/``rhs_spec``/``out_spec`` (batch/out-feature, feature, spatial...)."""
    a = instr.attrs
    wd = list(a["window"].dims) if a.get("window") is not None else []
    if any(d.window_reversal for d in wd):
        raise Unexpressible(f"convolution %{instr.name}: window reversal has no argument in "
                            f"the user APIs' convolutions")
    dn = a["dim_labels"]
    return {
        "window_strides": seq(d.stride for d in wd),
        "window_padding": seq(seq((d.padding_low, d.padding_high)) for d in wd),
        "lhs_dilation": seq(d.base_dilation for d in wd),
        "rhs_dilation": seq(d.window_dilation for d in wd),
        "feature_group_count": a.get("feature_group_count", 1),
        "batch_group_count": a.get("batch_group_count", 1),
        "dn": dn,
        "lhs_spec": (dn.input_batch_dimension, dn.input_feature_dimension,
                     *dn.input_spatial_dimensions),
        "rhs_spec": (dn.kernel_output_feature_dimension, dn.kernel_input_feature_dimension,
                     *dn.kernel_spatial_dimensions),
        "out_spec": (dn.output_batch_dimension, dn.output_feature_dimension,
                     *dn.output_spatial_dimensions),
    }


_RESERVED = {"jax", "jnp", "np", "lax", "tf", "ml_dtypes", "f", "result", "print"}


class Translator:
    """Writes the entry computation of ``module`` as a function ``f`` of its parameters,
    the inputs as literals, and ``result = f(...)`` then ``print(result)``."""

    api = ""

    def __init__(self, module, inputs: list):
        self.module = module
        self.inputs = list(inputs)
        self.notes: list[str] = []
        self._names: dict[int, str] = {}
        self._taken: set[str] = set(_RESERVED)

    #: opcode -> format string over :func:`fields` (and ``dtype``: the result's type)
    TEMPLATES: dict[str, str] = {}
    #: opcode -> method (translator, instr, args) -> expression
    SPECIAL: dict = {}
    #: the sequence type the API's attribute arguments take (tuple for jax, list for TF)
    SEQUENCE = tuple

    # -- to be given by the API's translator -----------------------------------------

    def check(self, instr) -> None:
        """Raise Unexpressible or add a note for ``instr`` before it is written."""

    def dtype(self, et) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def missing(self, instr) -> Unexpressible:  # pragma: no cover - abstract
        raise NotImplementedError

    def header(self) -> list[str]:  # pragma: no cover - abstract
        raise NotImplementedError

    def decorator(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def input_literal(self, value) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def constant(self, instr) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def prologue(self) -> list[str]:
        """Lines at the top of ``f`` (the API's conversions of its arguments)."""
        return []

    # -- shared ----------------------------------------------------------------------

    def op(self, instr, args: list[str]) -> str:
        """The expression of one instruction from its operands' variable names."""
        self.check(instr)
        special = self.SPECIAL.get(instr.opcode)
        if special is not None:
            return special(self, instr, args)
        template = self.TEMPLATES.get(instr.opcode)
        if template is None:
            raise self.missing(instr)
        values = fields(instr, args, self.SEQUENCE)
        if "{dtype}" in template:
            values["dtype"] = self.dtype(instr.shape.element_type)
        return template.format(**values)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def var(self, instr) -> str:
        key = id(instr)
        if key not in self._names:
            base = python_name(instr.name)
            name, k = base, 2
            while name in self._taken:
                name, k = f"{base}_{k}", k + 1
            self._taken.add(name)
            self._names[key] = name
        return self._names[key]

    def order(self) -> list:
        """The entry's live instructions (what evaluation needs), operands first."""
        from hloref.evaluator.interpreter import live_instructions, topological_order
        entry = self.module.entry
        live = live_instructions(self.module, entry)
        return [i for i in topological_order(entry) if id(i) in live]

    def statement(self, instr) -> str | None:
        if instr.opcode == "parameter":
            return None
        if instr.opcode == "constant":
            if instr.literal is None:
                raise Unexpressible(f"constant %{instr.name} has its value elided ({{...}})")
            return self.constant(instr)
        args = [self.var(o) for o in instr.operands]
        if instr.opcode == "tuple":
            return "(" + "".join(f"{a}, " for a in args).rstrip(" ") + ")"
        if instr.opcode == "get-tuple-element":
            return f"{args[0]}[{instr.attrs['index']}]"
        return self.op(instr, args)

    def code(self) -> str:
        entry = self.module.entry
        if self.module.replica_count * self.module.num_partitions > 1:
            raise Unexpressible("the module runs on several devices (replica_count/"
                                "num_partitions > 1)")
        params = [self.var(p) for p in entry.parameters]
        body = self.prologue()
        for instr in self.order():
            expr = self.statement(instr)
            if expr is not None:
                body.append(f"    {self.var(instr)} = {expr}")
        body.append(f"    return {self.var(entry.root)}")
        lines = self.header() + ["", "", self.decorator(), f"def f({', '.join(params)}):"]
        lines += body + [""]
        for name, value in zip(params, self.inputs):
            lines.append(f"{name} = {self.input_literal(value)}")
        lines += [f"result = f({', '.join(params)})", "print(result)"]
        return "\n".join(lines) + "\n"

    def computation(self, name: str):
        return self.module.computation(str(name))

    def binary_body(self, name: str) -> str | None:
        """The opcode of a computation that is one binary op of its two parameters
        (``p0 op p1`` or ``p1 op p0``), else None."""
        comp = self.computation(name)
        root = comp.root
        params = comp.parameters
        if len(params) != 2 or len(root.operands) != 2:
            return None
        if {id(o) for o in root.operands} != {id(p) for p in params}:
            return None
        return root.opcode

    def comparator(self, name: str) -> tuple[str, str] | None:
        """``(direction, type)`` of a sort comparator ``compare(p0, p1)``, else None."""
        comp = self.computation(name)
        root = comp.root
        params = comp.parameters
        if root.opcode != "compare" or len(params) < 2:
            return None
        if [id(o) for o in root.operands] != [id(params[0]), id(params[1])]:
            return None
        return str(root.attrs["direction"]), str(root.attrs.get("type", ""))
