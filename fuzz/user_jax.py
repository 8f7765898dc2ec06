"""An HLO module written as a plain JAX program: ``jax.lax`` calls under ``jax.jit``.

Each instruction becomes the ``jax.lax`` call that lowers to it (``count-leading-zeros``
-> ``lax.clz``); parameters become the jitted function's arguments, constants stay
constants (``jnp.asarray`` of a numpy literal inside the function, which JAX lowers to a
StableHLO constant, so XLA's constant folding sees them). Where the jax function computes
the op's value through other HLO ops (``lax.asin`` lowers to ``chlo.asin``, which XLA
expands into ``atan2``/``sqrt`` arithmetic), the translator notes it; what jax cannot
write at all (an element type ``jax.numpy`` lacks, an XLA-internal op such as
``fusion``, a comparator or reducer that is not one plain op) raises
:class:`~.user_translate.Unexpressible` with the reason. Checked against jax 0.10.2.
"""

from __future__ import annotations

import numpy as np

from hloref.op_properties import opcodes_with, values_of
from hloref.opcodes import GROUPS
from hloref.types import element_type

from .standalone import array_literal
from .user_translate import Translator, Unexpressible

__all__ = ["JaxTranslator", "UNARY", "BINARY", "EXPANDED"]

#: opcode -> the jax.lax function that emits it (op property ``jax-lax``), for the unary
#: and binary elementwise ops.
UNARY = {op: fn for op, fn in values_of("jax-lax").items() if op in GROUPS["unary"]}
BINARY = {op: fn for op, fn in values_of("jax-lax").items() if op in GROUPS["binary"]}

#: Unary ops whose jax function reaches XLA as other HLO ops (op property
#: ``jax-expanded``: opcode -> what the jax function lowers to).
EXPANDED = values_of("jax-expanded")

#: jax.lax function -> its arguments (an elementwise op's are its operands).
_ARGUMENTS = {
    "lax.select": "{x}, {y}, {z}",
    "lax.clamp": "{x}, {y}, {z}",
    "lax.bitcast_convert_type": "{x}, {dtype}",
    "lax.broadcasted_iota": "{dtype}, {shape}, {iota_dimension}",
    "lax.broadcast_in_dim": "{x}, {shape}, {dims}",
    "lax.reshape": "{x}, {shape}",
    "lax.transpose": "{x}, {dims}",
    "lax.rev": "{x}, {dims}",
    "lax.slice": "{x}, {starts}, {limits}, {strides}",
    "lax.concatenate": "[{args}], {dim0}",
    "lax.pad": "{x}, {y}, {padding_config}",
    "lax.dynamic_slice": "{x}, [{rest1}], {sizes}, allow_negative_indices=False",
    "lax.dynamic_update_slice": "{x}, {y}, [{rest2}], allow_negative_indices=False",
    "lax.reduce_precision":
        "{x}, exponent_bits={exponent_bits}, mantissa_bits={mantissa_bits}",
    "lax.conv_general_dilated": (
        "{x}, {y}, window_strides={window_strides}, "
        "padding={window_padding}, lhs_dilation={lhs_dilation}, rhs_dilation={rhs_dilation}, "
        "dimension_numbers=lax.ConvDimensionNumbers(lhs_spec={lhs_spec}, rhs_spec={rhs_spec}, "
        "out_spec={out_spec}), feature_group_count={feature_group_count}, "
        "batch_group_count={batch_group_count}, preferred_element_type={dtype}"),
}

_COMPARE = {"EQ": "lax.eq", "NE": "lax.ne", "LT": "lax.lt", "LE": "lax.le", "GT": "lax.gt",
            "GE": "lax.ge"}
_ROUND = {"round-nearest-afz": "AWAY_FROM_ZERO", "round-nearest-even": "TO_NEAREST_EVEN"}
_WIDE = {"s64", "u64", "f64", "c128"}


def jnp_dtype(et) -> str:
    """``jnp.int8`` for an hloref ElementType; Unexpressible where jax.numpy lacks it."""
    import jax.numpy as jnp
    name = "bool_" if et.name == "pred" else np.dtype(et.dtype).name
    if not hasattr(jnp, name):
        raise Unexpressible(f"jax.numpy has no dtype for the element type {et.name}")
    return f"jnp.{name}"


def _shape_of(instr):
    if not instr.shape.is_array:
        raise Unexpressible(f"%{instr.name} ({instr.opcode}) has a tuple shape")
    return instr.shape


class JaxTranslator(Translator):
    api = "jax"
    TEMPLATES = {
        **{code: f"{fn}({_ARGUMENTS.get(fn, '{x}' if code in UNARY else '{x}, {y}')})"
           for code, fn in values_of("jax-lax").items()},
        **{code: f"lax.round({{x}}, lax.RoundingMethod.{how})" for code, how in _ROUND.items()},
    }

    def header(self) -> list[str]:
        lines = ["import jax", "import jax.numpy as jnp", "import numpy as np",
                 "from jax import lax"]
        types = {s.element_type.name for _, i in self.module.instructions()
                 for s in _leaves(i.shape)}
        for et_name in sorted(types):
            jnp_dtype(element_type(et_name))
        if types & _WIDE:
            lines += ["", 'jax.config.update("jax_enable_x64", True)']
        return lines

    def decorator(self) -> str:
        return "@jax.jit"

    def input_literal(self, value) -> str:
        if isinstance(value, (tuple, list)):
            return "(" + "".join(f"{self.input_literal(v)}, " for v in value).rstrip() + ")"
        return array_literal(np.asarray(value), readable=True).replace("ml_dtypes.", "jnp.")

    def constant(self, instr) -> str:
        if not instr.shape.is_array:
            raise Unexpressible(f"constant %{instr.name} is a tuple")
        literal = array_literal(np.asarray(instr.literal), readable=True)
        return f"jnp.asarray({literal.replace('ml_dtypes.', 'jnp.')})"

    def dtype(self, et) -> str:
        return jnp_dtype(et)

    def missing(self, instr) -> Unexpressible:
        code = instr.opcode
        if code in opcodes_with("no-jax-call"):
            return Unexpressible(f"`{code}` (%{instr.name}): jax.lax has no call that emits "
                                 f"this HLO instruction"
                                 + (" (XLA makes fusions itself)" if code == "fusion" else ""))
        return Unexpressible(f"`{code}` (%{instr.name}) is not in the JAX translator's table")

    def check(self, instr) -> None:
        if instr.opcode in EXPANDED:
            self.note(f"{UNARY[instr.opcode]} lowers to {EXPANDED[instr.opcode]}: no HLO "
                      f"`{instr.opcode}` reaches XLA")

    def _compare(self, instr, args) -> str:
        if (str(instr.attrs.get("type", "")) == "TOTALORDER"
                and instr.operands[0].shape.element_type.is_float):
            raise Unexpressible("compare with type=TOTALORDER: jax.lax comparisons of "
                                "floats lower to the FLOAT comparison")
        return f"{_COMPARE[str(instr.attrs['direction'])]}({args[0]}, {args[1]})"

    def _convert(self, instr, args) -> str:
        et = _shape_of(instr).element_type
        source = instr.operands[0]
        if et.name == "pred" and source.shape.element_type.name != "pred":
            self.note("lax.convert_element_type(x, bool) lowers to compare(x, 0, NE): no "
                      "HLO `convert` to pred reaches XLA")
        if source.opcode == "constant" and source.shape.rank == 0:
            self.note("jax folds lax.convert_element_type of a scalar constant itself, with "
                      "numpy/ml_dtypes, while tracing (jax/_src/lax/lax.py "
                      "_convert_elt_type_folding_rule): XLA never sees this `convert`")
        return f"lax.convert_element_type({args[0]}, {jnp_dtype(et)})"

    def _reduce(self, instr, args) -> str:
        body = self.binary_body(instr.attrs["to_apply"])
        if len(args) != 2 or body not in opcodes_with("reducer-identity"):
            raise Unexpressible(f"reduce %{instr.name}: only a single-operand reduce whose "
                                f"reducer is one add/max/min/mul/and/or/xor is translated")
        return f"lax.reduce({args[0]}, {args[1]}, {BINARY[body]}, {tuple(instr.attrs['dimensions'])})"

    def _sort(self, instr, args) -> str:
        cmp = self.comparator(instr.attrs["to_apply"])
        et = instr.operands[0].shape.element_type
        if cmp is None or cmp[0] != "LT" or cmp[1] == "TOTALORDER":
            raise Unexpressible(f"sort %{instr.name}: jax.lax.sort builds its own ascending "
                                f"comparator; only a plain compare(p0, p1) LT one matches it")
        if et.is_float or et.is_complex:
            raise Unexpressible(f"sort %{instr.name} of {et.name}: jax.lax.sort compares "
                                f"floats in a total order (NaN and -0 canonicalized), not "
                                f"with the module's plain LT")
        dim = instr.attrs["dimensions"][0]
        stable = bool(instr.attrs.get("is_stable", False))
        if len(args) == 1:
            return f"lax.sort({args[0]}, dimension={dim}, is_stable={stable})"
        return f"lax.sort(({', '.join(args)},), dimension={dim}, is_stable={stable}, num_keys=1)"

    def _dot(self, instr, args) -> str:
        a = instr.attrs
        dims = ((tuple(a.get("lhs_contracting_dims", ())), tuple(a.get("rhs_contracting_dims", ()))),
                (tuple(a.get("lhs_batch_dims", ())), tuple(a.get("rhs_batch_dims", ()))))
        extra = ""
        if "algorithm" in a:
            from jax import lax
            name = str(a["algorithm"]).upper().removeprefix("DOT_")
            if name not in lax.DotAlgorithmPreset.__members__:
                raise Unexpressible(f"dot algorithm {a['algorithm']}: no jax.lax."
                                    f"DotAlgorithmPreset for it")
            extra = f", precision=lax.DotAlgorithmPreset.{name}"
        elif "operand_precision" in a:
            precs = ", ".join(f"lax.Precision.{str(p).upper()}" for p in a["operand_precision"])
            extra = f", precision=({precs})"
        et = jnp_dtype(_shape_of(instr).element_type)
        return f"lax.dot_general({args[0]}, {args[1]}, {dims}{extra}, preferred_element_type={et})"

    def _rng_bit_generator(self, instr, args) -> str:
        bits = instr.shape.elements[1]
        et = bits.element_type
        if et.name not in ("u8", "u16", "u32", "u64"):
            raise Unexpressible(f"rng-bit-generator %{instr.name} returns {et.name}: "
                                f"jax.lax.rng_bit_generator returns only uint8/16/32/64 "
                                f"(it raises 'unsupported dtype')")
        algorithm = str(instr.attrs.get("algorithm", "rng_default")).upper()
        return (f"lax.rng_bit_generator({args[0]}, {tuple(bits.dims)}, {jnp_dtype(et)}, "
                f"algorithm=lax.RandomAlgorithm.{algorithm})")


#: opcode -> the method that writes what a template cannot say.
_SPECIAL = {
    "compare": JaxTranslator._compare, "convert": JaxTranslator._convert,
    "reduce": JaxTranslator._reduce, "sort": JaxTranslator._sort, "dot": JaxTranslator._dot,
    "rng-bit-generator": JaxTranslator._rng_bit_generator,
}
JaxTranslator.SPECIAL = _SPECIAL


def _leaves(shape) -> list:
    from hloref.shapes import ArrayShape, flatten_shape
    return [s for s in flatten_shape(shape) if isinstance(s, ArrayShape)]
