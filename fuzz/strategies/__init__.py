"""Hypothesis strategies for HLO programs that are valid by construction.

The strategies build ``hloref.ir`` objects directly: shapes are drawn first,
attributes are derived from them, and every result shape comes from
``hloref.shape_inference.infer_shape``; nothing is filtered after the fact. The
programs look like what XLA's compiler sees:

* DAGs with reuse and fan-out (operands are taken from a pool of earlier values
  more often than not), mixed element types joined by ``convert``;
* glue (``reshape``/``slice``/``broadcast``/``transpose``/``convert``) inserted
  where an op needs an operand of a shape or type the pool does not hold;
* reductions with real reducer computations (identity init values), ``dot`` and
  ``convolution`` with random dimension numbers, ``gather``/``scatter`` with random
  dimension numbers, ``sort`` with comparators, ``while`` loops whose trip count
  is bounded (a counter in the loop-carried tuple compared with a constant),
  ``conditional``, ``call``, ``map``, ``opt-barrier``, constants;
* non-default layouts, zero-size dimensions, scalars, sizes just above powers of
  two, sub-byte integers and every float type including f8 and f4.

Public strategies (keyword-only bounds, validated with ``InvalidArgument``):

``element_types()``, ``shapes()``, ``instructions(opcode=...)``,
``computations()``, ``modules(...)`` and ``inputs_for(module)``; structured ones,
shared by the makers and the tests: ``scatter_dims(operand_dims)``,
``gather_dims(operand_dims)`` and ``conv_configs()`` (dimension numbers valid by
construction, with the shapes they imply).

``modules(ops=...)`` restricts the opcodes the generator picks (glue ops are still
used to connect values); ``weights={opcode: w}`` biases the choice. The opcodes a
module can reach are ``GENERATABLE_OPCODES``; ``reachable_opcodes()`` intersects
them with what hloref evaluates.

Generated modules carry ``module.fuzz_hints``: parameter number → role
(``index``, ``positive``, ``spd``, ``triangular``, ``state``), which
``inputs_for`` uses to pick sensible values (e.g. symmetric positive definite
matrices for ``cholesky``, possibly out-of-range starts for ``dynamic-slice``).

Layout: ``shapes`` (element types, shapes, argument checks), ``builder`` (``Builder``:
one computation's operand pool and glue), one maker module per op family mirroring
``evaluator/`` (``elementwise``, ``convert``, ``shape_ops``, ``control``, ``reduce``,
``windows``, ``sort``, ``dot``, ``convolution``, ``indexing``, ``linalg``, ``rng``),
``registry`` (opcode -> maker, default weights), ``programs`` (the module strategies)
and ``inputs`` (arguments).
"""

from .convolution import ConvConfig, conv_configs
from .indexing import GatherDims, ScatterDims, gather_dims, scatter_dims
from .inputs import INPUT_MODES, Inputs, inputs_for, random_inputs
from .programs import computations, instructions, modules
from .registry import DEFAULT_WEIGHTS, GENERATABLE_OPCODES, NOT_IN_XLA, reachable_opcodes
from .shapes import ALL_ELEMENT_TYPES, ORACLE_ELEMENT_TYPES, element_types, shapes

__all__ = [
    "element_types", "shapes", "instructions", "computations", "modules", "inputs_for",
    "GENERATABLE_OPCODES", "ORACLE_ELEMENT_TYPES", "ALL_ELEMENT_TYPES", "reachable_opcodes",
    "INPUT_MODES", "NOT_IN_XLA", "Inputs", "random_inputs", "DEFAULT_WEIGHTS",
    "scatter_dims", "gather_dims", "conv_configs", "ScatterDims", "GatherDims", "ConvConfig",
]
