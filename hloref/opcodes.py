"""The op catalogue: every opcode hloref knows, with what the rest of hloref needs
to know about it, written once.

Per opcode (``CATALOGUE[opcode]``, an ``OpInfo``): its arity as XLA's
``HLO_OPCODE_LIST`` gives it (``VARIADIC`` = -1), the fewest operands a variadic op
takes, the evaluator module (``family``) that evaluates it, the element kinds its
main operand may have by XLA's shape rules (letters f(loat) c(omplex) s(igned)
u(nsigned) p(red); ``-``: types fixed by the opcode, see ``FIXED_TYPES``), its
attributes (required ones are marked ``!`` in the table below) and its groups.
``ATTRIBUTE_TYPES`` gives each attribute's value type.

The opcode list is XLA's ``xla/hlo/ir/hlo_opcode.h`` ``HLO_OPCODE_LIST`` (133
names at ROCm/xla ``main`` 183fa00cb5d82384463a1a7aed1ab06bc9026974, 2026-08-22)
plus the three openxla head names listed in ``NOT_IN_PINNED_XLA``;
``tests/test_catalogue.py`` checks the list and the arities against the header.

Groups (``GROUPS[name]``, also as constants):

* ``unary``, ``binary``: the elementwise arithmetic ops of one and two operands
  (shape rule: same shape, kinds as listed; ``compare`` is separate).
* ``elementwise``: XLA's ``HloInstruction::IsOpElementwise`` (``bitcast-convert``
  only between types of one bit width), plus ``atan``.
* ``transcendental``: XLA's ``HloCostAnalysis`` transcendental ops (results are
  approximations: compared with ULP tolerances), plus ``atan``.
* ``discontinuous``: a result can jump when an operand moves by one ULP (rounding to
  integers, sign, compare, remainder, convert to integer types, is-finite).
* ``accumulating``: each result element is a sum (or other combination) of many
  terms in an order XLA leaves free (reassociation, duplicate scatter indices,
  overlapping select-and-scatter windows, FFT butterflies), so rounding depends
  on the order and an intermediate can overflow while the exact result does not.
* ``expanded``: ops XLA's CPU pipeline expands into element-type arithmetic
  (batch norm, cholesky, triangular-solve): their error is the expansion's.
* ``structural``: only move or forward values; never wrong on their own.
* ``side-effecting``: XLA's ``HasSideEffectNoRecurse`` unconditional cases (the
  collectives are also side-effecting with ``constrain_layout`` or a channel id
  outside SPMD, and ``custom-call`` with ``custom_call_has_side_effect=true``).
* ``inferable``: XLA's parser infers the result shape when the text leaves it out
  (``CanInferShape`` in ``xla/hlo/parser/hlo_parser.cc``).
* ``dedicated-async``: opcodes with their own ``-start``/``-done`` opcodes, never
  written as ``async-start`` wrappers.
* ``forwards``: the result is operand 0's value itself (``add-dependency`` drops its
  token).
* ``alone-identity``: collectives whose results, on a group of one device, are their
  operands (a reduction or concatenation of one; the broadcast root is the device itself);
  ``collective-permute`` depends on its pairs, ``collective-reduce`` drops its root
  operand.
* ``cpu-thunk``: standing unfused in XLA:CPU's optimized module, the op runs as a runtime
  thunk (SortThunk, DotThunk, ConvolutionThunk, FftThunk, CopyThunk, the collective,
  control-flow, infeed/outfeed and custom-call thunks), not as a generated kernel
  (``xla/backends/cpu/runtime/thunk_emitter.cc``, ``ThunkEmitter::EmitHloInstruction``);
  stage attribution (``fuzz/stages.py``) reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["OpInfo", "CATALOGUE", "GROUPS", "ATTRIBUTE_TYPES", "FIXED_TYPES", "VARIADIC",
           "OPCODE_ARITY", "ALL_OPCODES", "MIN_OPERANDS", "REQUIRED_ATTRS", "NOT_IN_PINNED_XLA",
           "UNARY", "BINARY", "ELEMENTWISE", "TRANSCENDENTAL", "DISCONTINUOUS", "ACCUMULATING",
           "EXPANDED", "STRUCTURAL", "SIDE_EFFECTING", "SHAPE_INFERABLE", "DEDICATED_ASYNC",
           "FORWARDS", "ALONE_IDENTITY",
           "attributes_of_type", "in_group"]

VARIADIC = -1

#: One row per opcode: arity (``var``: variadic), fewest operands, evaluator family
#: (``interpreter``: the interpreter loop itself), operand element kinds, groups.
_OPS = """
# opcode                 ar  min family          kinds groups
abs                      1   1   elementwise     fcs   unary elementwise inferable
acos                     1   1   elementwise     fc    unary elementwise transcendental inferable
acosh                    1   1   elementwise     fc    unary elementwise transcendental inferable
add                      2   2   elementwise     fcsup binary elementwise inferable
add-dependency           2   2   control         fcsup structural inferable forwards
after-all                var 0   control         -     structural inferable
all-gather               var 1   collectives     fcsup dedicated-async alone-identity cpu-thunk
all-gather-done          1   1   collectives     fcsup side-effecting
all-gather-start         var 0   collectives     fcsup side-effecting
all-reduce               var 1   collectives     fcsup accumulating dedicated-async alone-identity cpu-thunk
all-reduce-done          1   1   collectives     fcsup side-effecting
all-reduce-start         var 0   collectives     fcsup accumulating side-effecting
all-to-all               var 1   collectives     fcsup alone-identity cpu-thunk
and                      2   2   elementwise     psu   binary elementwise inferable
asin                     1   1   elementwise     fc    unary elementwise transcendental inferable
asinh                    1   1   elementwise     fc    unary elementwise transcendental inferable
async-done               1   1   async_ops       fcsup
async-start              var 0   interpreter     fcsup
async-update             var 0   async_ops       fcsup
atan                     1   1   elementwise     fc    unary elementwise transcendental
atan2                    2   2   elementwise     fc    binary elementwise transcendental inferable
atanh                    1   1   elementwise     fc    unary elementwise transcendental inferable
batch-norm-grad          5   5   linalg          f     expanded inferable
batch-norm-inference     5   5   linalg          f     expanded inferable
batch-norm-training      3   3   linalg          f     expanded inferable
bitcast                  1   1   shape_ops       fcsup structural
bitcast-convert          1   1   bitwise_convert fcsup elementwise
broadcast                1   1   shape_ops       fcsup inferable
call                     var 0   control         fcsup inferable cpu-thunk
# cbrt: XLA's InferUnaryOpShape: "Expected element type in shape to be floating for cbrt"
cbrt                     1   1   elementwise     f     unary elementwise transcendental inferable
ceil                     1   1   elementwise     f     unary elementwise discontinuous inferable
cholesky                 1   1   linalg          fc    expanded inferable
clamp                    3   3   compare         fcsup elementwise inferable
count-leading-zeros      1   1   elementwise     su    unary elementwise inferable
collective-broadcast     var 0   collectives     fcsup side-effecting alone-identity
collective-permute       var 1   collectives     fcsup dedicated-async cpu-thunk
collective-permute-done  1   1   collectives     fcsup side-effecting
collective-permute-start var 0   collectives     fcsup side-effecting
collective-reduce        var 1   collectives     fcsup accumulating
compare                  2   2   compare         fcsup elementwise discontinuous inferable
complex                  2   2   elementwise     f     binary elementwise inferable
concatenate              var 1   shape_ops       fcsup inferable
conditional              var 1   control         fcsup inferable cpu-thunk
constant                 0   0   control         fcsup structural
convert                  1   1   convert         fcsup elementwise discontinuous
convolution              var 2   convolution     fcsup accumulating inferable cpu-thunk
copy                     1   1   shape_ops       fcsup elementwise inferable dedicated-async forwards cpu-thunk
copy-done                1   1   async_ops       fcsup
copy-start               1   1   async_ops       fcsup
cosine                   1   1   elementwise     fc    unary elementwise transcendental inferable
cosh                     1   1   elementwise     fc    unary elementwise transcendental inferable
custom-call              var 0   custom_call     fcsup cpu-thunk
divide                   2   2   elementwise     fcsu  binary elementwise inferable
domain                   1   1   control         fcsup structural inferable forwards
dot                      2   2   dot             fcsup accumulating inferable cpu-thunk
dynamic-reshape          var 1   shape_ops       fcsup
dynamic-slice            var 1   indexing        fcsup
dynamic-update-slice     var 2   indexing        fcsup
erf                      1   1   elementwise     f     unary elementwise transcendental inferable
exponential              1   1   elementwise     fc    unary elementwise transcendental inferable
exponential-minus-one    1   1   elementwise     fc    unary elementwise transcendental inferable
fft                      1   1   linalg          fc    accumulating inferable cpu-thunk
floor                    1   1   elementwise     f     unary elementwise discontinuous inferable
fusion                   var 0   control         fcsup
gather                   2   2   indexing        fcsup inferable
get-dimension-size       1   1   indexing        fcsup inferable
get-tuple-element        1   1   shape_ops       fcsup structural inferable
imag                     1   1   elementwise     fc    unary elementwise inferable
infeed                   1   1   collectives     fcsup side-effecting cpu-thunk
iota                     0   0   shape_ops       fcsup
is-finite                1   1   elementwise     f     unary elementwise discontinuous inferable
log                      1   1   elementwise     fc    unary elementwise transcendental inferable
log-plus-one             1   1   elementwise     fc    unary elementwise transcendental inferable
logistic                 1   1   elementwise     fc    unary elementwise transcendental inferable
map                      var 1   windows         fcsup inferable
maximum                  2   2   elementwise     fcsup binary elementwise inferable
minimum                  2   2   elementwise     fcsup binary elementwise inferable
mulhi                    2   2   elementwise     su    binary elementwise inferable
multiply                 2   2   elementwise     fcsup binary elementwise inferable
negate                   1   1   elementwise     fcsu  unary elementwise inferable
not                      1   1   elementwise     psu   unary elementwise inferable
opt-barrier              1   1   control         fcsup structural inferable forwards
or                       2   2   elementwise     psu   binary elementwise inferable
outfeed                  2   2   collectives     fcsup side-effecting cpu-thunk
pad                      2   2   shape_ops       fcsup inferable
parameter                0   0   interpreter     fcsup structural
partition-id             0   0   collectives     -     inferable
popcnt                   1   1   elementwise     su    unary elementwise inferable
power                    2   2   elementwise     fcsu  binary elementwise transcendental inferable
ragged-all-to-all        6   6   collectives     fcsup
ragged-dot               3   3   dot_variants    fcsup accumulating inferable
real                     1   1   elementwise     fc    unary elementwise inferable
recv                     1   1   collectives     fcsup side-effecting dedicated-async
recv-done                1   1   collectives     fcsup side-effecting
reduce                   var 2   reduce          fcsup accumulating inferable
reduce-precision         1   1   bitwise_convert f     elementwise
reduce-scatter           var 1   collectives     fcsup accumulating alone-identity cpu-thunk
reduce-window            var 2   windows         fcsup accumulating inferable
remainder                2   2   elementwise     fsu   binary elementwise discontinuous inferable
replica-id               0   0   collectives     -     inferable
reshape                  1   1   shape_ops       fcsup
reverse                  1   1   shape_ops       fcsup inferable
rng                      var 2   rng             fsup  side-effecting
rng-bit-generator        1   1   rng             fcsup
rng-get-and-update-state 0   0   rng             -     side-effecting cpu-thunk
round-nearest-afz        1   1   elementwise     f     unary elementwise discontinuous inferable
round-nearest-even       1   1   elementwise     f     unary elementwise discontinuous inferable
rsqrt                    1   1   elementwise     fc    unary elementwise transcendental inferable
scaled-dot               4   4   dot_variants    fcsup accumulating inferable
scan                     var 0   windows         fcsup inferable
scatter                  var 3   indexing        fcsup accumulating inferable
select                   3   3   compare         fcsup elementwise inferable
select-and-scatter       3   3   windows         fcsup accumulating inferable
send                     2   2   collectives     fcsup side-effecting dedicated-async
send-done                1   1   collectives     fcsup side-effecting
set-dimension-size       2   2   indexing        fcsup inferable
shift-left               2   2   elementwise     su    binary elementwise inferable
shift-right-arithmetic   2   2   elementwise     su    binary elementwise inferable
shift-right-logical      2   2   elementwise     su    binary elementwise inferable
shuffle                  1   1   shape_ops       fcsup
sign                     1   1   elementwise     fcs   unary elementwise discontinuous inferable
sine                     1   1   elementwise     fc    unary elementwise transcendental inferable
sinh                     1   1   elementwise     fc    unary elementwise transcendental inferable
slice                    1   1   shape_ops       fcsup
sort                     var 1   sort            fcsup inferable cpu-thunk
sqrt                     1   1   elementwise     fc    unary elementwise transcendental inferable
stochastic-convert       2   2   bitwise_convert f     elementwise
subtract                 2   2   elementwise     fcsu  binary elementwise inferable
tan                      1   1   elementwise     fc    unary elementwise transcendental inferable
tanh                     1   1   elementwise     fc    unary elementwise transcendental inferable
topk                     1   1   sort            fcsup inferable cpu-thunk
transpose                1   1   shape_ops       fcsup inferable
triangular-solve         2   2   linalg          fc    expanded inferable
tuple                    var 0   shape_ops       fcsup structural inferable
while                    1   1   control         fcsup inferable cpu-thunk
xor                      2   2   elementwise     psu   binary elementwise inferable
"""

#: The attributes each opcode takes (``!``: required, as ``HloParser::CreateInstruction``
#: requires it). A line that starts with blanks continues the opcode above. Every
#: instruction may also carry ``metadata``, ``sharding``, ``frontend_attributes``,
#: ``backend_config``, ``statistics``, ``control-predecessors`` and
#: ``origin`` (``GENERIC_ATTRIBUTES``).
_ATTRS = """
acos                      result_accuracy
acosh                     result_accuracy
all-gather                dimensions! replica_groups channel_id use_global_device_ids
                          constrain_layout
all-gather-start          dimensions! replica_groups channel_id use_global_device_ids
                          constrain_layout
all-reduce                to_apply! replica_groups channel_id use_global_device_ids
                          constrain_layout
all-reduce-start          to_apply! replica_groups channel_id use_global_device_ids
                          constrain_layout
all-to-all                dimensions replica_groups channel_id constrain_layout
asin                      result_accuracy
asinh                     result_accuracy
async-start               calls!
atan                      result_accuracy
atanh                     result_accuracy
batch-norm-grad           epsilon! feature_index!
batch-norm-inference      epsilon! feature_index!
batch-norm-training       epsilon! feature_index!
broadcast                 dimensions
call                      to_apply!
cbrt                      result_accuracy
cholesky                  lower
collective-broadcast      replica_groups channel_id has_dynamic_root
collective-permute        source_target_pairs! channel_id slice_sizes
collective-permute-start  source_target_pairs channel_id slice_sizes
collective-reduce         to_apply! has_dynamic_root replica_groups channel_id
                          use_global_device_ids
compare                   direction! type
concatenate               dimensions!
conditional               true_computation false_computation branch_computations
convolution               dim_labels! window feature_group_count batch_group_count
                          operand_precision algorithm
cosine                    result_accuracy
cosh                      result_accuracy
custom-call               custom_call_target! backend_config dim_labels window feature_group_count
                          batch_group_count api_version custom_call_has_side_effect
                          output_to_operand_aliasing
domain                    domain!
dot                       lhs_batch_dims rhs_batch_dims lhs_contracting_dims rhs_contracting_dims
                          operand_precision algorithm
dynamic-slice             dynamic_slice_sizes!
erf                       result_accuracy
exponential               result_accuracy
exponential-minus-one     result_accuracy
fft                       fft_type! fft_length!
fusion                    calls! kind!
gather                    offset_dims! collapsed_slice_dims! start_index_map! index_vector_dim!
                          slice_sizes! operand_batching_dims start_indices_batching_dims
                          indices_are_sorted
get-dimension-size        dimensions!
get-tuple-element         index!
infeed                    infeed_config
iota                      iota_dimension!
log                       result_accuracy
log-plus-one              result_accuracy
logistic                  result_accuracy
map                       to_apply! dimensions
outfeed                   outfeed_config outfeed_shape
pad                       padding!
ragged-all-to-all         replica_groups channel_id
ragged-dot                lhs_batch_dims rhs_batch_dims lhs_contracting_dims rhs_contracting_dims
                          lhs_ragged_dims rhs_group_dims operand_precision algorithm
recv                      channel_id is_host_transfer frontend_attributes
recv-done                 channel_id is_host_transfer
reduce                    dimensions! to_apply!
reduce-precision          exponent_bits! mantissa_bits!
reduce-scatter            dimensions! replica_groups to_apply! channel_id use_global_device_ids
                          constrain_layout
reduce-window             window to_apply!
reshape                   inferred_dimension
reverse                   dimensions!
rng                       distribution!
rng-bit-generator         algorithm!
rng-get-and-update-state  delta!
rsqrt                     result_accuracy
scaled-dot                lhs_batch_dims rhs_batch_dims lhs_contracting_dims rhs_contracting_dims
                          operand_precision algorithm
scan                      to_apply dimensions num_carries is_reverse is_associative
scatter                   update_window_dims! inserted_window_dims! scatter_dims_to_operand_dims!
                          index_vector_dim! to_apply! input_batching_dims
                          scatter_indices_batching_dims indices_are_sorted unique_indices
select-and-scatter        window select! scatter!
send                      channel_id is_host_transfer frontend_attributes
send-done                 channel_id is_host_transfer
set-dimension-size        dimensions!
shuffle                   dimensions! mode! shifts indices
sine                      result_accuracy
sinh                      result_accuracy
slice                     slice!
sort                      dimensions! to_apply! is_stable
sqrt                      result_accuracy
tan                       result_accuracy
tanh                      result_accuracy
topk                      k! largest is_stable
transpose                 dimensions!
triangular-solve          left_side lower unit_diagonal transpose_a
while                     condition! body!
"""

GENERIC_ATTRIBUTES = ("metadata", "sharding", "frontend_attributes", "backend_config",
                      "statistics", "control-predecessors", "origin")

#: Attribute name → value type. ``raw``: kept as text.
ATTRIBUTE_TYPES: dict[str, str] = {
    **dict.fromkeys("""
        dimensions fft_length slice_sizes dynamic_slice_sizes lhs_contracting_dims
        rhs_contracting_dims lhs_batch_dims rhs_batch_dims lhs_ragged_dims rhs_group_dims
        offset_dims collapsed_slice_dims start_index_map operand_batching_dims
        start_indices_batching_dims update_window_dims inserted_window_dims
        scatter_dims_to_operand_dims input_batching_dims scatter_indices_batching_dims shifts
        """.split(), "int_list"),
    **dict.fromkeys("""
        index iota_dimension feature_group_count batch_group_count index_vector_dim k
        feature_index exponent_bits mantissa_bits channel_id num_carries delta
        inferred_dimension cross_program_prefetch_index
        """.split(), "int"),
    **dict.fromkeys("""
        indices_are_sorted unique_indices is_stable largest has_dynamic_root lower left_side
        unit_diagonal is_host_transfer use_global_device_ids constrain_layout
        custom_call_has_side_effect is_cross_program_prefetch is_reverse is_associative
        is_composite
        """.split(), "bool"),
    "epsilon": "float",
    **dict.fromkeys("direction type fft_type distribution algorithm kind mode transpose_a".split(),
                    "enum"),
    "operand_precision": "enum_list",
    "custom_call_target": "string",
    **dict.fromkeys("to_apply calls condition body true_computation false_computation select "
                    "scatter".split(), "computation"),
    **dict.fromkeys(["branch_computations", "called_computations"], "computation_list"),
    "indices": "literal",
    "window": "window", "dim_labels": "dim_labels", "slice": "slice", "padding": "padding",
    "replica_groups": "replica_groups", "source_target_pairs": "source_target_pairs",
    **dict.fromkeys("""
        domain result_accuracy infeed_config outfeed_config outfeed_shape api_version
        output_to_operand_aliasing metadata sharding frontend_attributes backend_config
        statistics origin
        """.split(), "raw"),
    "control-predecessors": "instruction_list",
}

#: Opcodes whose array element types the opcode fixes (kinds ``-`` above).
FIXED_TYPES: dict[str, tuple[str, ...]] = {
    "replica-id": ("u32",), "partition-id": ("u32",), "rng-get-and-update-state": ("u64",),
    "after-all": (),
}

#: Opcodes of openxla's head that ROCm/xla main at the pinned commit does not list.
NOT_IN_PINNED_XLA: dict[str, str] = {
    "atan": "hloref evaluates it; XLA's parser in jaxlib 0.10.2 does not know it",
    "collective-reduce": "upstream collective_reduce_thunk.cc (newer than the pinned main)",
    "shuffle": "upstream shuffle_expander.cc (newer than the pinned main)",
}


@dataclass(frozen=True)
class OpInfo:
    opcode: str
    arity: int                      # VARIADIC (-1) or the fixed operand count
    min_operands: int               # fewest operands (== arity when fixed)
    family: str                     # evaluator module ("interpreter": the loop itself)
    kinds: str                      # operand element kinds: letters of "fcsup"; "-": fixed
    attributes: tuple[str, ...]     # attribute names the opcode takes
    required: tuple[str, ...]       # the ones it cannot do without
    groups: frozenset[str]


def _parse() -> dict[str, OpInfo]:
    attrs: dict[str, list[str]] = {}
    last = None
    for line in _ATTRS.strip("\n").splitlines():
        if line.startswith(" "):
            attrs[last] += line.split()
        else:
            last, *names = line.split()
            attrs[last] = names
    out: dict[str, OpInfo] = {}
    for line in _OPS.strip("\n").splitlines():
        if line.startswith("#"):
            continue
        opcode, arity, least, family, kinds, *groups = line.split()
        names = attrs.pop(opcode, [])
        out[opcode] = OpInfo(
            opcode, VARIADIC if arity == "var" else int(arity), int(least), family, kinds,
            tuple(n.rstrip("!") for n in names), tuple(n[:-1] for n in names if n.endswith("!")),
            frozenset(groups))
    if attrs:
        raise ValueError(f"attributes of unknown opcodes: {sorted(attrs)}")
    return out


CATALOGUE: dict[str, OpInfo] = _parse()

ALL_OPCODES: tuple[str, ...] = tuple(CATALOGUE)
OPCODE_ARITY: dict[str, int] = {op: info.arity for op, info in CATALOGUE.items()}
#: Fewest operands of the variadic opcodes that need at least one.
MIN_OPERANDS: dict[str, int] = {op: info.min_operands for op, info in CATALOGUE.items()
                                if info.arity == VARIADIC and info.min_operands}
#: Attributes an opcode cannot do without (``HloParser::CreateInstruction``).
REQUIRED_ATTRS: dict[str, tuple[str, ...]] = {op: info.required for op, info in CATALOGUE.items()
                                              if info.required}

GROUPS: dict[str, frozenset[str]] = {}
for _info in CATALOGUE.values():
    for _group in _info.groups:
        GROUPS[_group] = GROUPS.get(_group, frozenset()) | {_info.opcode}
del _info, _group

UNARY = GROUPS["unary"]
BINARY = GROUPS["binary"]
ELEMENTWISE = GROUPS["elementwise"]
TRANSCENDENTAL = GROUPS["transcendental"]
DISCONTINUOUS = GROUPS["discontinuous"]
ACCUMULATING = GROUPS["accumulating"]
EXPANDED = GROUPS["expanded"]
STRUCTURAL = GROUPS["structural"]
SIDE_EFFECTING = GROUPS["side-effecting"]
SHAPE_INFERABLE = GROUPS["inferable"]
DEDICATED_ASYNC = GROUPS["dedicated-async"]
FORWARDS = GROUPS["forwards"]
ALONE_IDENTITY = GROUPS["alone-identity"]


def in_group(opcode: str, group: str) -> bool:
    return opcode in GROUPS.get(group, ())


def attributes_of_type(type_name: str) -> frozenset[str]:
    """The attribute names whose values are of ``type_name`` (``ATTRIBUTE_TYPES``)."""
    return frozenset(n for n, t in ATTRIBUTE_TYPES.items() if t == type_name)
