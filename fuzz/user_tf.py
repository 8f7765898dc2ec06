"""An HLO module written as a plain TensorFlow program: ``tf`` ops and the tf2xla ones
(``tensorflow.compiler.tf2xla.python.xla``: sort, pad, dynamic slices, dot_general,
rng_bit_generator) under ``tf.function(jit_compile=True)``.

Parameters become the function's arguments, constants stay ``tf.constant``. What TF
cannot write (a type its ops or its XLA do not take, an op it lacks) raises
:class:`~.user_translate.Unexpressible`. Checked against TensorFlow 2.21.
"""

from __future__ import annotations

import numpy as np

from hloref.op_properties import PROPERTIES, opcodes_with, values_of
from hloref.opcodes import CATALOGUE, GROUPS

from .oracles.tf import TF_DTYPES
from .standalone import array_literal
from .user_translate import Translator, Unexpressible

__all__ = ["TfTranslator", "UNARY", "NO_TF_OP"]

#: opcode -> the TensorFlow op that emits it (op property ``tf-function``), for the unary
#: elementwise ops.
UNARY = {op: fn for op, fn in values_of("tf-function").items() if op in GROUPS["unary"]}
#: Ops whose TF function depends on the element type (op property ``tf-by-type``).
_BY_TYPE = opcodes_with("tf-by-type")
_COMPARE = {"EQ": "tf.math.equal", "NE": "tf.math.not_equal", "LT": "tf.math.less",
            "LE": "tf.math.less_equal", "GT": "tf.math.greater", "GE": "tf.math.greater_equal"}

#: HLO ops TensorFlow has no op for (op property ``no-tf-op``, which says what TF has
#: instead).
NO_TF_OP = opcodes_with("no-tf-op")
#: TF function -> its arguments (an elementwise op's are its operands).
_ARGUMENTS = {
    "tf.where": "{x}, {y}, {z}",
    "tfxla.clamp": "{x}, {y}, {z}",
    "tf.bitcast": "{x}, {dtype}",
    "tf.reshape": "{x}, {shape}",
    "tf.transpose": "{x}, {dims}",
    "tf.reverse": "{x}, {dims}",
    "tf.strided_slice": "{x}, {starts}, {limits}, {strides}",
    "tf.concat": "[{args}], {dim0}",
    "tfxla.pad": "{x}, {y}, {low}, {high}, {interior}",
    "tfxla.conv": (
        "{x}, {y}, window_strides={window_strides}, padding={window_padding}, "
        "lhs_dilation={lhs_dilation}, rhs_dilation={rhs_dilation}, "
        "dimension_numbers=xla_data_pb2.ConvolutionDimensionNumbers("
        "input_batch_dimension={dn.input_batch_dimension}, "
        "input_feature_dimension={dn.input_feature_dimension}, "
        "input_spatial_dimensions={dn.input_spatial_dimensions}, "
        "kernel_input_feature_dimension={dn.kernel_input_feature_dimension}, "
        "kernel_output_feature_dimension={dn.kernel_output_feature_dimension}, "
        "kernel_spatial_dimensions={dn.kernel_spatial_dimensions}, "
        "output_batch_dimension={dn.output_batch_dimension}, "
        "output_feature_dimension={dn.output_feature_dimension}, "
        "output_spatial_dimensions={dn.output_spatial_dimensions}), "
        "feature_group_count={feature_group_count}, batch_group_count={batch_group_count}, "
        "preferred_element_type={dtype}"),
}
_RNG = {"rng_default": 0, "rng_three_fry": 1, "rng_philox": 2}


def tf_dtype(et) -> str:
    """``tf.int8`` / ``tf.as_dtype(ml_dtypes.float8_e4m3fn)`` for an hloref ElementType;
    Unexpressible for a type TF's XLA cannot take as itself."""
    if et.name in ("s4", "u4"):
        raise Unexpressible(f"TF 2.21's ops take no {et.name} operands (tf.math.add: 'DataType "
                            f"int4 not in list of allowed values'), and its XLA reads "
                            f"int4/uint4 arguments packed")
    if et.name not in TF_DTYPES:
        raise Unexpressible(f"TensorFlow 2.21 has no dtype its XLA takes for the element "
                            f"type {et.name}")
    name = TF_DTYPES[et.name]
    if name.startswith("float8"):
        return f"tf.as_dtype(ml_dtypes.{name})"
    return f"tf.{name}"


class TfTranslator(Translator):
    api = "tf"
    SEQUENCE = list
    TEMPLATES = {code: f"{fn}({_ARGUMENTS.get(fn, '{x}' if code in UNARY else '{x}, {y}')})"
                 for code, fn in values_of("tf-function").items() if code not in _BY_TYPE}

    def __init__(self, module, inputs: list):
        super().__init__(module, inputs)
        self._extra_imports: set[str] = set()

    def header(self) -> list[str]:
        lines = ["import numpy as np", "import tensorflow as tf"]
        if "ml_dtypes" in self._extra_imports:
            lines.insert(0, "import ml_dtypes")
        if "tfxla" in self._extra_imports:
            lines.append("from tensorflow.compiler.tf2xla.python import xla as tfxla")
        if "xla_data_pb2" in self._extra_imports:
            lines.append("from tensorflow.compiler.xla import xla_data_pb2")
        return lines

    def decorator(self) -> str:
        return "@tf.function(jit_compile=True)"

    def code(self) -> str:
        # the body is written first: it decides the imports the header needs
        body = super().code()
        if "ml_dtypes." in body:
            self._extra_imports.add("ml_dtypes")
        if "tfxla." in body:
            self._extra_imports.add("tfxla")
        if "xla_data_pb2." in body:
            self._extra_imports.add("xla_data_pb2")
        return super().code()

    def input_literal(self, value) -> str:
        return array_literal(np.asarray(value), readable=True)

    def constant(self, instr) -> str:
        if not instr.shape.is_array:
            raise Unexpressible(f"constant %{instr.name} is a tuple")
        tf_dtype(instr.shape.element_type)
        return f"tf.constant({array_literal(np.asarray(instr.literal), readable=True)})"

    def dtype(self, et) -> str:
        return tf_dtype(et)

    def missing(self, instr) -> Unexpressible:
        if instr.opcode in NO_TF_OP:
            return Unexpressible(f"`{instr.opcode}` (%{instr.name}): "
                                 f"{PROPERTIES['no-tf-op'].reason}")
        return Unexpressible(f"`{instr.opcode}` (%{instr.name}) is not in the TF translator's "
                             f"table")

    def check(self, instr) -> None:
        if instr.opcode in NO_TF_OP:
            raise self.missing(instr)
        for s in (instr.shape, *[o.shape for o in instr.operands]):
            if s.is_array:
                tf_dtype(s.element_type)

    def _by_type(self, instr, args) -> str:
        """Ops whose TF function depends on the element type (pred / integer / float)."""
        code, et = instr.opcode, instr.shape.element_type
        if CATALOGUE[code].kinds == "psu":  # and, or, xor: logical on pred, else bitwise
            fn = f"tf.math.logical_{code}" if et.is_pred else values_of("tf-function")[code]
            return f"{fn}({', '.join(args)})"
        if code in ("shift-right-arithmetic", "shift-right-logical"):
            if (code == "shift-right-arithmetic") != et.is_signed_integer:
                raise Unexpressible(f"`{code}` of {et.name}: tf.bitwise.right_shift is "
                                    f"arithmetic for signed and logical for unsigned types")
            return f"tf.bitwise.right_shift({args[0]}, {args[1]})"
        fn = {("divide", True): "tf.truncatediv", ("divide", False): "tf.math.divide",
              ("remainder", True): "tf.truncatemod",
              ("remainder", False): "tf.truncatemod"}[(code, et.is_integer)]
        return f"{fn}({args[0]}, {args[1]})"

    def _compare(self, instr, args) -> str:
        if (str(instr.attrs.get("type", "")) == "TOTALORDER"
                and instr.operands[0].shape.element_type.is_float):
            raise Unexpressible("compare with type=TOTALORDER: TF has no total-order comparison")
        return f"{_COMPARE[str(instr.attrs['direction'])]}({args[0]}, {args[1]})"

    def _convert(self, instr, args) -> str:
        et, src = instr.shape.element_type, instr.operands[0].shape.element_type
        if et.is_pred and not src.is_pred:
            self.note("tf.cast(x, tf.bool) is compiled as x != 0: no HLO `convert` to pred "
                      "reaches XLA")
        return f"tf.cast({args[0]}, {tf_dtype(et)})"

    def _dynamic_slice(self, instr, args) -> str:
        if instr.opcode == "dynamic-slice":
            return (f"tfxla.dynamic_slice({args[0]}, {self._indices(instr, args[1:])}, "
                    f"{list(instr.attrs['dynamic_slice_sizes'])})")
        return (f"tfxla.dynamic_update_slice({args[0]}, {args[1]}, "
                f"{self._indices(instr, args[2:])})")

    def _rng_bit_generator(self, instr, args) -> str:
        bits = instr.shape.elements[1]
        algorithm = _RNG[str(instr.attrs.get("algorithm", "rng_default"))]
        return (f"tfxla.rng_bit_generator({algorithm}, {args[0]}, {list(bits.dims)}, "
                f"{tf_dtype(bits.element_type)})")

    def _indices(self, instr, names: list[str]) -> str:
        """The scalar start indices as the one int32/int64 vector the tf2xla ops take."""
        kinds = {o.shape.element_type.name for o in instr.operands[-len(names):]}
        if kinds <= {"s32"} or kinds <= {"s64"}:
            return f"tf.stack([{', '.join(names)}])"
        self.note(f"the tf2xla slice ops take int32/int64 start indices: the "
                  f"{'/'.join(sorted(kinds))} indices of %{instr.name} are cast to int32")
        return f"tf.stack([{', '.join(f'tf.cast({n}, tf.int32)' for n in names)}])"

    def _broadcast(self, instr, x: str) -> str:
        dims = list(instr.attrs["dimensions"])
        if dims != sorted(dims):
            raise Unexpressible(f"broadcast %{instr.name} with unsorted dimensions {dims}: "
                                f"tf.broadcast_to cannot reorder")
        out = list(instr.shape.dims)
        src = list(instr.operands[0].shape.dims)
        ones = [1] * len(out)
        for k, d in enumerate(dims):
            ones[d] = src[k]
        return f"tf.broadcast_to(tf.reshape({x}, {ones}), {out})"

    def _not(self, instr, args) -> str:
        fn = "tf.math.logical_not" if instr.shape.element_type.is_pred else "tf.bitwise.invert"
        return f"{fn}({args[0]})"

    def _sort(self, instr, args) -> str:
        cmp = self.comparator(instr.attrs["to_apply"])
        rank = instr.operands[0].shape.rank
        if len(args) != 1 or cmp is None or cmp[0] != "LT" or cmp[1] == "TOTALORDER":
            raise Unexpressible(f"sort %{instr.name}: tfxla.sort sorts one operand with a "
                                f"plain LT comparator only")
        if instr.attrs["dimensions"][0] != rank - 1:
            raise Unexpressible(f"sort %{instr.name}: tfxla.sort sorts along the last "
                                f"dimension only")
        return f"tfxla.sort({args[0]})"

    def _dot(self, instr, args) -> str:
        a = instr.attrs
        if "algorithm" in a:
            raise Unexpressible(f"dot %{instr.name} with algorithm={a['algorithm']}: not "
                                f"translated to TF (PrecisionConfig.algorithm)")
        dn = (f"xla_data_pb2.DotDimensionNumbers("
              f"lhs_contracting_dimensions={list(a.get('lhs_contracting_dims', ()))}, "
              f"rhs_contracting_dimensions={list(a.get('rhs_contracting_dims', ()))}, "
              f"lhs_batch_dimensions={list(a.get('lhs_batch_dims', ()))}, "
              f"rhs_batch_dimensions={list(a.get('rhs_batch_dims', ()))})")
        return (f"tfxla.dot_general({args[0]}, {args[1]}, {dn}, "
                f"preferred_element_type={tf_dtype(instr.shape.element_type)})")


#: opcode -> the method that writes what a template cannot say.
_SPECIAL = {
    **{code: TfTranslator._by_type for code in _BY_TYPE},
    "not": TfTranslator._not, "compare": TfTranslator._compare, "convert": TfTranslator._convert,
    "dynamic-slice": TfTranslator._dynamic_slice,
    "dynamic-update-slice": TfTranslator._dynamic_slice,
    "broadcast": lambda t, instr, args: t._broadcast(instr, args[0]),
    "sort": TfTranslator._sort,
    "dot": TfTranslator._dot, "rng-bit-generator": TfTranslator._rng_bit_generator,
}
TfTranslator.SPECIAL = _SPECIAL
