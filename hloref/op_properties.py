"""Op properties: what the rest of hloref knows about an opcode beyond its catalogue row,
written once, each with its reason.

``hloref/opcodes.py`` holds one row per opcode (arity, family, kinds, groups). The
properties here are the facts that used to be hand-typed sets of opcode names next to
the code that read them (the envelope's exact ops, the reducer's vectorizable
combiners, ULP budgets, the generator's deliberate narrowing, ...). Every such set is
derived from here: ``tests/test_opcode_literals.py`` fails on a collection of three or
more opcode names anywhere else.

Format of the tables below: a property starts with a line ``[name] reason`` (the
reason continues on following lines that start with ``|``); then lines of opcodes,
each either ``opcode`` or ``opcode=value`` (a property with values maps each opcode to
its value as text; ``value_of`` converts it). Lines starting with ``#`` are comments.
The tables are split by the part of hloref that reads them, so that each part's facts
sit together; a property name is unique across all of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from hloref.opcodes import CATALOGUE

__all__ = ["Property", "PROPERTIES", "opcodes_with", "values_of", "has_property"]


@dataclass(frozen=True)
class Property:
    name: str
    reason: str
    values: dict[str, str]          # opcode -> value text ("" for a plain set)
    table: str                      # which table below states it

    @property
    def opcodes(self) -> frozenset[str]:
        return frozenset(self.values)


#: Properties the evaluator and the GPU backend read.
_EVALUATOR = """
[sequential-callers] their called computations run in sequence, in the caller's context, and
| get buffers of their own (XLA's call graph calls this context kControlFlow; HloLiveRange
| follows it): the memory audit (hloref/liveness.py, hloref/memory_arena.py) walks into
| them; with fusion, they are also the ops the interpreter passes runtime sizes into
| (evaluator/dynamic.py CONTROL_OPCODES)
while conditional call

[value-forwarding] the result is operand 0's value: no buffer of its own (XLA's
| HloDataflowAnalysis defines no value at them, it forwards the operand's); the memory
| audit (hloref/liveness.py) aliases them. Typed "optimization-barrier" (no such opcode)
| in liveness.py before, so opt-barrier got a buffer of its own there
bitcast domain add-dependency opt-barrier

[zero-byte-buffers] the memory audit (hloref/liveness.py) counts their buffers as 0 bytes:
| a token has none; replica-id and partition-id as in XLA's buffer assignments the audit
| was checked against (hloref/assignment_check.py, commit 08e1693; the reason was not
| written down there)
after-all partition-id replica-id

[buffer-views] in-place analysis (hloref/liveness.py inplace_pairs) looks through them to
| the instruction whose buffer an operand is: their result is a view of operand 0's buffer
bitcast get-tuple-element reshape

[reducer-vectorized] besides the elementwise group (less reducer-scalar-only), the ops a
| reducer, comparator or combiner may hold and still run on whole arrays at once
| (evaluator/reduce.py VECTORIZABLE): they only pass the scalars through, which works the
| same on arrays
parameter constant tuple get-tuple-element opt-barrier

[reducer-scalar-only] elementwise, but a reducer holding them is evaluated one scalar at a
| time (the vectorized path was never checked with them: the exclusion dates from the
| first evaluator commit e6a159f, without a reason; both evaluator functions take arrays)
reduce-precision stochastic-convert

[declared-shape] shape inference takes their whole result shape from the declaration and
| checks no constraint (hloref/shape_inference/declared.py); the verifier skips them
parameter constant custom-call bitcast infeed outfeed recv recv-done send send-done
async-start async-update async-done all-reduce-start all-reduce-done all-gather-start
all-gather-done collective-permute-start collective-permute-done copy-start copy-done
ragged-all-to-all ragged-dot scaled-dot scan

[free-part] the part of the result shape their operands leave free, which shape inference
| fills from the declared result shape (the keyword of the shape_inference rule; XLA's
| ShapeInference takes it as an argument: InferConvertShape's new element type,
| InferDotOpShape's preferred element type, InferBroadcastShape's dimensions, ...); the
| declared-shape ops take the whole "shape"
convert=result_element_type bitcast-convert=result_element_type
stochastic-convert=result_element_type dot=result_element_type
convolution=result_element_type
broadcast=result_dims reshape=result_dims dynamic-reshape=result_dims rng=result_dims
iota=shape rng-bit-generator=output_shape
all-gather=shard_count reduce-scatter=shard_count

[complex-to-component] on a complex operand the result is the component float type (XLA's
| ShapeInference::InferUnaryOpShape; gpu/complex_elementwise.py TO_REAL implements them)
abs real imag

[replica-groups-checked] the verifier checks their replica groups before shape inference
| (XLA's CheckReplicaGroups, hloref/verifier.py replica_groups); all-gather and
| reduce-scatter have theirs checked with their shard count, all-to-all with its split
| count
all-reduce all-reduce-start all-gather-start ragged-all-to-all

[global-device-ids-mode] XLA's GetCollectiveOpGroupMode(instr) reads their
| use_global_device_ids (the other collectives pass nullopt); the verifier's group mode
| and the GPU's participants (gpu/computation_devices.py) follow it. collective-reduce
| takes the attribute too but is newer than the pinned XLA
all-reduce all-reduce-start all-gather all-gather-start reduce-scatter

[rendezvous] devices meet at them: a computation holding one qualifies for the GPU's
| several-device path (gpu/computation_devices.py), which refuses the ones not
| gpu-device-collectives (they run on the CPU)
all-reduce all-gather reduce-scatter all-to-all collective-permute collective-broadcast
all-reduce-start all-reduce-done all-gather-start all-gather-done collective-permute-start
collective-permute-done collective-reduce ragged-all-to-all send recv send-done recv-done

[gpu-device-collectives] the collectives the GPU's several-device path
| (gpu/computation_devices.py) runs, dedicated async pairs included
all-reduce all-gather reduce-scatter all-to-all collective-permute collective-broadcast
all-reduce-start all-reduce-done all-gather-start all-gather-done collective-permute-start
collective-permute-done

[impure] the value does not depend on the operands alone (draws, host transfers,
| collectives, device ids, custom calls) or the op calls other computations: a while
| condition free of them is a function of the loop state (evaluator/control.py, which
| proves a loop cannot end). Not the side-effecting group: the *-done ops depend on their
| start operand only; collective-broadcast, collective-reduce and ragged-all-to-all are
| missing here (a gap, kept as found)
rng rng-get-and-update-state infeed recv recv-done custom-call call fusion while
conditional all-reduce all-reduce-start all-gather all-gather-start collective-permute
collective-permute-start all-to-all reduce-scatter partition-id replica-id
async-start async-done send send-done outfeed

[scalar-value-kept] on an integer scalar, the result holds the operand's value: ci/
| conformance_workers.py reads a set-dimension-size's size operand through them to the
| parameter it comes from
convert reshape copy bitcast
"""

#: Properties the verdict wing reads: comparison, known classes, reduction, strategies,
#: mutations, the user-program translations.
_VERDICT = """
# --- comparison (fuzz/compare.py)
[ulp-budget] extra ULPs where XLA:CPU computes the function with its own polynomial
| approximation: XLA's accuracy budgets (xla/codegen/intrinsic/accuracy, HLO_SURFACE
| §4.8) plus one for hloref's rounding, widened where XLA was measured further off (erf
| f32: 4 ULP below 1; tanh f64: 6 ULP just above -1); floats of 16 bits or fewer get at
| most compare.NARROW_OPCODE_ULPS (value: ULPs)
exponential=7 exponential-minus-one=7 log=2 log-plus-one=2 tanh=8 atan=4 atan2=4 erf=5
tan=3 sine=2 cosine=2 cbrt=2 rsqrt=2 sqrt=1 power=8 logistic=8 sinh=8 cosh=8 asin=4
acos=4 asinh=8 acosh=8 atanh=8

# --- the generator (fuzz/strategies/)
[generator-weight] the opcodes the generator draws (each has a maker in
| fuzz/strategies/registry.py), in its order, and how often (relative weight: unary
| elementwise 1 and binary 1.5 unless raised for an op common in real programs). A unary
| or binary op of the catalogue not listed here is drawn too, at those defaults, after
| the listed ones, unless not-generated names it; atan is drawn only when asked for
| (registry.NOT_IN_XLA)
floor=1 ceil=1 round-nearest-afz=1 round-nearest-even=1 is-finite=1 erf=1 cosine=1
sine=1 tan=1 exponential=1.5 exponential-minus-one=1 log=1 log-plus-one=1 logistic=1
rsqrt=1 sqrt=1 tanh=1.5 atan=1 cbrt=1 acos=1 acosh=1 asin=1 asinh=1 atanh=1 cosh=1
sinh=1 real=1 imag=1 abs=1 sign=1 negate=1 count-leading-zeros=1 popcnt=1 not=1 copy=1
add=4 subtract=2 multiply=3 divide=1.5 remainder=1.5 power=1.5 atan2=1.5 maximum=2
minimum=1.5 and=1.5 or=1.5 xor=1.5 shift-left=1.5 shift-right-arithmetic=1.5
shift-right-logical=1.5 complex=1.5 compare=3 select=3 clamp=1.5 convert=4
bitcast-convert=1.5 reduce-precision=1 broadcast=3 reshape=3 transpose=2.5 reverse=1
slice=2.5 concatenate=2 pad=2 iota=1.5 constant=2 dynamic-slice=2 dynamic-update-slice=2
tuple=1 get-tuple-element=1 call=1.5 while=2 conditional=1.5 map=1 opt-barrier=0.7
reduce=4 reduce-window=2 select-and-scatter=1 sort=2 gather=2 scatter=2 dot=4
convolution=2.5 fft=0.7 cholesky=0.5 triangular-solve=0.7 batch-norm-inference=0.6
batch-norm-training=0.6 batch-norm-grad=0.5 topk=0.8 rng-bit-generator=0.5
stochastic-convert=0.5

[not-generated] a unary or binary op the generator never draws: jaxlib 0.10.2's XLA
| cannot run mulhi (its StableHLO comes out as mhlo.unknown and fails to parse; checked
| with `hloref diff` on a one-op module), so every generated mulhi would be an oracle
| failure
mulhi

[generated-real-only] the generator gives these real operands only, narrower than their
| catalogue kinds: their complex forms are UNIMPLEMENTED on XLA:CPU (jaxlib 0.10.2), so a
| complex operand only tests the oracle's refusal
acos acosh asin asinh atanh cosh sinh

[maker-needs-kind] a type profile (fuzz/type_profiles.py) keeps the op only when it
| holds an element type of this kind (letters of fcsup): fft and complex make complex
| values, rng-bit-generator's state and stochastic-convert's random bits are unsigned
fft=c complex=c rng-bit-generator=u stochastic-convert=u

[body-op] what the generator builds the bodies of called computations (callees, loop
| bodies and conditions, branches) from, in its order: a smaller vocabulary than the
| entry's (generator-weight) of common arithmetic, moves and a few heavier ops (reduce,
| sort, dot)
add multiply subtract maximum minimum negate abs convert select compare broadcast reshape
transpose slice reduce dot exponential tanh dynamic-slice dynamic-update-slice
concatenate and xor sort iota pad reverse clamp

[control-flow] runs a called computation as control flow (a call, a loop's condition
| and body, a branch): the generator nests them while the depth allows, and the
| control-flow mutations put computations only where these may go (XLA:CPU aborts on a
| while loop in a reduce-window's reducer)
call while conditional

[generated-reducer] the single-op reducers the generator draws for reduce and
| reduce-window (value: the operand kinds it draws each for): associative and
| commutative on those kinds, so XLA's free reassociation changes a result at most by
| rounding; multiply, and, or only on integers (and, or also on pred), where they are
| exact. Float add is drawn twice as often (strategies/reduce.reducer_kinds); f8e8m0fnu
| draws no add: it has no zero (0 converts to NaN), so add has no identity to start from
add=fcsu multiply=su maximum=fsup minimum=fsup and=psu or=psu

[generated-scatter-combiner] the combiners the generator draws for scatter besides
| assignment (value: operand kinds): independent of the order in which XLA applies
| updates to one element (float add only with unique indices, where there is no order)
add=fsu maximum=fsup minimum=fsup or=p

[generated-map-body] the ops the generator builds a map's scalar body from: the
| common arithmetic of one or two scalars, each drawn only where its catalogue kinds
| take the mapped element type
add multiply maximum subtract negate abs

# --- reducers and identities (fuzz/known_gaps.py, fuzz/contract.py, ci/)
[reducer-identity] the identity of the single-op reducer (operation_semantics §Reduce:
| "all initial values have to form an identity under computation"); and: 1 for pred,
| all bits set for integers; maximum/minimum: the type's lowest/highest value where it
| has no infinity (value: the identity as a number)
add=0 or=0 xor=0 multiply=1 and=1 maximum=-inf minimum=inf

[not-associative] an op that makes a reducer holding it non-associative (or
| non-commutative): XLA may reassociate a reduction, so the result depends on the order
| (known_gaps: reducer-order), unless evaluating the reducer shows otherwise; convert and
| reduce-precision round the running value at every step, so the sum of a reducer that
| holds one depends on the order too
subtract divide power remainder atan2 convert reduce-precision

# --- known classes (fuzz/known_gaps.py, fuzz/known_bugs.py)
[tf-fast-min-max] TensorFlow 2.21's XLA computes these with fast min/max that does not
| propagate NaN (known gap tf-fast-min-max)
maximum minimum clamp

[tf-inaccurate-transcendental] TensorFlow 2.21's XLA computes these in f32/f64 beyond
| the ULP budget (cbrt 3/30 ULP; cosh 15/13 ULP, sinh 19 ULP: exp(|x| - log 2) amplifies
| the argument's rounding), and jaxlib's XLA:CPU rejects cosh/sinh (known gap
| tf-transcendental-accuracy)
cbrt cosh sinh

[moves-elements] only moves, copies or drops elements: a value read through it is the
| operand's value (known bug s4-wraps: XLA's float-normalization-s4 keeps these
| unwrapped)
reshape slice broadcast transpose copy bitcast reverse

[e8m0-moves] ops that compute no f8e8m0fnu value of their own (they hold, move or
| pack values): the known bugs about XLA folding f8e8m0fnu arithmetic skip them (matched
| as opcode prefixes, so copy-start and bitcast-convert count too)
get-tuple-element tuple reshape broadcast slice transpose copy bitcast concatenate
reverse pad constant

[s4-arithmetic] XLA:CPU (jaxlib 0.10.2) returns unwrapped s4 sums, differences and
| products when the result is converted to a wider type, directly or through ops that
| only move elements (known bug s4-wraps)
add subtract multiply

# --- mutations (fuzz/mutations.py, fuzz/mutations_control.py)
[not-same-type] elementwise ops whose operands and result need not share one element
| type, or whose value depends on the type's format beyond the value (reduce-precision's
| bit counts must fit it; popcnt and count-leading-zeros count its bits): the retype
| mutation, which moves a region into another type, leaves them alone
compare convert bitcast-convert select reduce-precision stochastic-convert is-finite
real imag complex popcnt count-leading-zeros

[special-value-op] the binary ops the special-values mutation applies with a special
| value (inf, NaN, ±0, the extremes) as the second operand
add subtract multiply divide maximum minimum

[relayout] the identity the relayout mutation inserts: a copy to another layout, or a
| transpose/reshape pair that gives back the operand's shape
copy transpose reshape

[applies-per-element] The mutation campaign's cost estimate (fuzz/mutation_cost.py) counts
| a call of these computations per element: hloref applies them element by element
| (reducers, comparators, combiners); the value is the attributes naming them.
reduce=to_apply reduce-window=to_apply scatter=to_apply sort=to_apply map=to_apply
select-and-scatter=select,scatter all-reduce=to_apply reduce-scatter=to_apply

[never-wrapped] the control-flow mutations never wrap these in a call, conditional or
| while (besides the side-effecting ops): a wrapped op becomes the root of a computation
| whose parameters are its operands, which says nothing new for ops without data operands
| (parameter, constant, iota, replica-id, partition-id, after-all), for tuple plumbing
| and token ordering (tuple, get-tuple-element, add-dependency), and moves ops whose
| meaning is where they stand (domain, opt-barrier, custom-call, rng-bit-generator's
| state) (the list predates recorded reasons; this one is inferred from the mutation)
parameter after-all custom-call rng-bit-generator get-tuple-element tuple constant iota
partition-id replica-id add-dependency domain opt-barrier

# --- folding, rewrites, reduction (fuzz/folding.py, fuzz/rewrites.py, fuzz/xla_view.py,
# fuzz/reduce.py)
[not-folded] ops without operands (or with only a state) that XLA's constant folding
| leaves alone: their values come from outside or from a state
parameter rng rng-get-and-update-state rng-bit-generator infeed recv recv-done
custom-call after-all replica-id partition-id

[same-shape-forward] forwards its operand's value unchanged when the shapes agree
| (XLA's algebraic simplifier removes it): folding looks through it
copy reshape bitcast

[constant-wrapper] what XLA's constant folding leaves around a constant: a broadcast,
| convert, reshape, copy or bitcast of one is still a constant to the rewrites
broadcast convert reshape copy bitcast

# --- findings, stages, differential (fuzz/filing.py, fuzz/findings.py, fuzz/stages.py ...)
[plumbing] supplies or routes values without computing: left out of a finding's
| signature and a root key's pattern, and of what a text round trip may lose
parameter constant tuple get-tuple-element

[emits-nothing] at the top level of an optimized module, emits no code of its own
| besides the plumbing: a bitcast is a view of its operand's buffer, after-all a token
| (fuzz/pass_coverage.py; fuzz/stages.py counts the bitcast only)
bitcast after-all

# --- the user-program translators (fuzz/user_jax.py, fuzz/user_tf.py)
[jax-lax] the jax.lax function whose lowering emits the opcode (jax 0.10.2; where
| jax-expanded names the op it reaches XLA as other ops instead); the JAX translator
| writes it (round-nearest-* are lax.round with a rounding method)
abs=lax.abs negate=lax.neg sign=lax.sign floor=lax.floor ceil=lax.ceil
exponential=lax.exp exponential-minus-one=lax.expm1 log=lax.log log-plus-one=lax.log1p
sqrt=lax.sqrt rsqrt=lax.rsqrt cbrt=lax.cbrt tanh=lax.tanh tan=lax.tan sine=lax.sin
cosine=lax.cos is-finite=lax.is_finite real=lax.real imag=lax.imag
count-leading-zeros=lax.clz popcnt=lax.population_count erf=lax.erf not=lax.bitwise_not
logistic=lax.logistic asin=lax.asin acos=lax.acos atanh=lax.atanh asinh=lax.asinh
acosh=lax.acosh sinh=lax.sinh cosh=lax.cosh
add=lax.add subtract=lax.sub multiply=lax.mul divide=lax.div remainder=lax.rem
power=lax.pow maximum=lax.max minimum=lax.min atan2=lax.atan2 and=lax.bitwise_and
or=lax.bitwise_or xor=lax.bitwise_xor shift-left=lax.shift_left
shift-right-arithmetic=lax.shift_right_arithmetic
shift-right-logical=lax.shift_right_logical complex=lax.complex
select=lax.select clamp=lax.clamp bitcast-convert=lax.bitcast_convert_type
iota=lax.broadcasted_iota broadcast=lax.broadcast_in_dim reshape=lax.reshape
transpose=lax.transpose reverse=lax.rev slice=lax.slice concatenate=lax.concatenate
pad=lax.pad dynamic-slice=lax.dynamic_slice dynamic-update-slice=lax.dynamic_update_slice
reduce-precision=lax.reduce_precision convolution=lax.conv_general_dilated

[jax-expanded] the jax.lax function reaches XLA as other HLO ops, so no HLO instruction
| of this opcode does (value: what it lowers to; checked on jax 0.10.2 with
| jax.jit(f).lower(x).as_text(dialect="hlo")):
| XLA expands chlo.asin into atan2(x, 1 + sqrt((1 - x)(1 + x))) * 2, chlo.acos into
| atan2(sqrt((1 - x)(1 + x)), x) arithmetic, chlo.atanh into (log1p(x) - log1p(-x)) / 2
| with a select, chlo.asinh and chlo.acosh into log/sqrt arithmetic, chlo.sinh into
| expm1/exp arithmetic, chlo.cosh into exp arithmetic
asin=chlo.asin acos=chlo.acos atanh=chlo.atanh asinh=chlo.asinh acosh=chlo.acosh
sinh=chlo.sinh cosh=chlo.cosh logistic=1/(1+exp(-x))

[no-jax-call] jax.lax has no call that emits this HLO instruction by itself (XLA makes
| fusions itself; the others take computations, which the translator does not write)
fusion call map while conditional custom-call

[tf-function] the TensorFlow op that emits the opcode (TensorFlow 2.21; tfxla:
| tensorflow.compiler.tf2xla.python.xla); the TF translator writes it. and/or/xor:
| the bitwise op, for integers (pred takes tf.math.logical_*, op property tf-by-type)
abs=tf.math.abs negate=tf.math.negative sign=tf.math.sign floor=tf.math.floor
ceil=tf.math.ceil round-nearest-even=tf.math.round exponential=tf.math.exp
exponential-minus-one=tf.math.expm1 log=tf.math.log log-plus-one=tf.math.log1p
sqrt=tf.math.sqrt rsqrt=tf.math.rsqrt tanh=tf.math.tanh tan=tf.math.tan sine=tf.math.sin
cosine=tf.math.cos is-finite=tf.math.is_finite real=tf.math.real imag=tf.math.imag
erf=tf.math.erf logistic=tf.math.sigmoid asin=tf.math.asin acos=tf.math.acos
atanh=tf.math.atanh asinh=tf.math.asinh acosh=tf.math.acosh sinh=tf.math.sinh
cosh=tf.math.cosh
add=tf.math.add subtract=tf.math.subtract multiply=tf.math.multiply power=tf.math.pow
maximum=tf.math.maximum minimum=tf.math.minimum atan2=tf.math.atan2
shift-left=tf.bitwise.left_shift and=tf.bitwise.bitwise_and or=tf.bitwise.bitwise_or
xor=tf.bitwise.bitwise_xor
select=tf.where clamp=tfxla.clamp bitcast-convert=tf.bitcast reshape=tf.reshape
transpose=tf.transpose reverse=tf.reverse slice=tf.strided_slice concatenate=tf.concat
pad=tfxla.pad convolution=tfxla.conv

[tf-by-type] TensorFlow has one op per element type class for these: logical ops on
| pred and bitwise ones on integers (and, or, xor), truncating integer division
| (tf.truncatediv) beside float division, tf.truncatemod for remainder, and one right shift
| that is arithmetic for signed and logical for unsigned types
and or xor divide remainder shift-right-arithmetic shift-right-logical

[no-tf-op] TensorFlow 2.21 has no op that emits it: no count-leading-zeros, no cube
| root, no round-half-away-from-zero (tf.math.round rounds half to even), no iota, and
| no op that emits an HLO fusion (XLA makes fusions itself)
count-leading-zeros cbrt round-nearest-afz iota fusion

[composite] runs computations of its own: when it mismatches, its envelope is sampled
| on the instruction alone (fuzz/differential.py)
call fusion while conditional async-start map custom-call
"""

#: Properties the envelope (``fuzz/perturb.py`` and its parts) reads.
_ENVELOPE = """
[envelope-exact] Results computed exactly from their operands, or moved unchanged: the
| envelope's runs never perturb them (data movement, selection, comparison, rounding
| to an integer, control flow and communication without arithmetic; the ops that a
| type makes inexact are ``e8m0-inexact`` and the complex ``abs``).
parameter constant tuple get-tuple-element bitcast reshape transpose broadcast slice
dynamic-slice dynamic-update-slice concatenate pad reverse copy copy-start copy-done
gather select clamp maximum minimum negate abs compare iota sort topk floor ceil
round-nearest-afz round-nearest-even sign is-finite real imag complex bitcast-convert
reduce-precision remainder while call fusion conditional async-start async-done
async-update opt-barrier domain after-all add-dependency get-dimension-size
set-dimension-size dynamic-reshape rng rng-bit-generator rng-get-and-update-state infeed
outfeed send send-done recv recv-done partition-id replica-id collective-permute
collective-permute-start collective-permute-done all-gather all-gather-start
all-gather-done all-to-all ragged-all-to-all shuffle select-and-scatter map
stochastic-convert

[e8m0-inexact] Exact in every type but f8e8m0fnu, which has neither zero nor sign: its
| f32 value there (0, a negative, a NaN's image) is not representable and XLA's float
| normalization may keep it under excess precision; the value is the numpy function
| that computes the op exactly in f64 (``round_afz``: half away from zero).
remainder=fmod negate=negative floor=floor ceil=ceil round-nearest-even=rint
round-nearest-afz=round_afz

[communicating] Accumulating collectives: evaluating one again is another rendezvous
| with the other devices, which only the devices whose run chose to recompute would
| join; each result element sums one term per participant.
all-reduce all-reduce-start reduce-scatter collective-reduce

[combiner-accumulating] Accumulations through a written combiner computation
| (``to_apply``): their order is free only when the combiner adds or multiplies.
reduce reduce-window scatter all-reduce all-reduce-start reduce-scatter collective-reduce

[f32-product-sum] Products summed in f32 when the operands are narrower (XLA:CPU and
| XLA:GPU both do): the accumulation budget uses f32's epsilon for narrow floats.
dot convolution ragged-dot scaled-dot

[arithmetic-user] Consumers that read a value through its numeric value, in f32 or
| wider, so a narrow operand kept unrounded in f32 means to them what excess precision
| means to XLA; bit-level and structural users get the rounded value. Float
| normalization computes a narrow reduce in f32 too, reading its inputs' f32 values
| where a convert pair was removed (an f8e8m0fnu acosh read by a convert and a min/max
| reduce: XLA's convert saw 6.93, the e8m0 value is 8; a campaign, seed 23).
add subtract multiply divide sqrt rsqrt cbrt exponential exponential-minus-one log
log-plus-one tanh logistic sine cosine tan atan2 power maximum minimum negate abs compare
convert dot convolution erf sinh cosh asin acos atan asinh acosh atanh reduce reduce-window

[random-rounded] Results an exact wider computation can check, randomly rounded where
| inexact (CESTAC); the value is the numpy function computing it in f64.
add=add subtract=subtract multiply=multiply divide=divide sqrt=sqrt

[narrow-math-f64] Transcendentals XLA computes in f32 for a narrow float and rounds
| (a few f32 ULPs, far below one narrow ULP: either neighbour of the exact value); the
| value is the numpy function of the f64 reference (``logistic``, ``rsqrt``: written
| out in ``perturb.py``).
exponential=exp exponential-minus-one=expm1 log=log log-plus-one=log1p tanh=tanh
logistic=logistic sine=sin cosine=cos tan=tan atan=arctan atan2=arctan2 cbrt=cbrt
rsqrt=rsqrt power=power sinh=sinh cosh=cosh asin=arcsin acos=arccos asinh=arcsinh
acosh=arccosh atanh=arctanh

[daz-reader] Arithmetic that XLA:CPU's DAZ bit lets read a subnormal operand as zero
| (data movement, control flow and accumulations are left out: the terms of a sum XLA
| may flush are in the accumulation budget, ``flushed_terms``).
add subtract multiply divide remainder power atan2 compare sign floor ceil
round-nearest-afz round-nearest-even maximum minimum clamp sqrt rsqrt cbrt log
log-plus-one exponential exponential-minus-one tanh logistic sine cosine tan atan erf
sinh cosh asin acos asinh acosh atanh convert

[lockstep-elementwise] The envelope's runs in lockstep (fuzz/lockstep.py) evaluate these
| once on operands stacked on a leading sample axis: their op functions read and write
| element by element whatever the rank, so a stacked call gives each run the value it
| has alone (benchmarks/envelope_identity.py checks it on realistic programs).
add subtract multiply divide maximum minimum negate abs exponential log tanh sqrt rsqrt
compare select convert power and or not xor sign floor ceil is-finite logistic
exponential-minus-one log-plus-one sine cosine

[lockstep-per-run] Evaluated once per run in lockstep even when every run holds the same
| operands: the value is not a function of the operands alone (a draw; an async pair's
| state) or the op applies a computation whose steps a run perturbs (map, scan).
rng-bit-generator async-start async-update async-done map scan

[program-control] Instructions whose called computations are program steps (perturbed
| like the entry's); the value is the attributes naming them. Computations applied by
| reduce, scatter, sort... are combiners, not steps; XLA:CPU runs a scan as a while
| loop (per-step arithmetic) and XLA's MapInliner inlines a map's computation into
| elementwise ops.
call=to_apply fusion=calls while=condition,body scan=to_apply map=to_apply
conditional=branch_computations,true_computation,false_computation async-start=calls

[pairwise-combiner] Combiners that are associative and commutative on their own pair of
| scalars (a reducer ``op(x_j, y_j)`` of one such op is reordered like a single one).
add multiply maximum minimum and or xor

[reordered-combiner] Combiners whose order of application is free and rounds: a sum's
| terms, a product's factors (XLA:CPU reassociates both; max/min/and/or/xor are exact).
add multiply

[complex-formula] Complex transcendentals XLA:CPU builds from real formulas
| (elementwise_ir_emitter): their error is bounded by the formula's, not a ULP budget.
sine cosine power atan2
"""


def _parse(table_name: str, text: str, out: dict[str, Property]) -> None:
    name = reason = None
    values: dict[str, str] = {}

    def close() -> None:
        if name is not None:
            out[name] = Property(name, " ".join(reason.split()), dict(values), table_name)

    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            close()
            end = line.index("]")
            name, reason, values = line[1:end], line[end + 1:], {}
            if name in out:
                raise ValueError(f"op property {name!r} is stated twice")
        elif line.startswith("|"):
            reason += " " + line[1:]
        else:
            if name is None:
                raise ValueError(f"{table_name}: opcodes before the first [property]: {line!r}")
            for word in line.split():
                opcode, _, value = word.partition("=")
                if opcode not in CATALOGUE:
                    raise ValueError(f"op property {name!r} names unknown opcode {opcode!r}")
                values[opcode] = value
    close()


PROPERTIES: dict[str, Property] = {}
for _table_name, _text in (("evaluator", _EVALUATOR), ("verdict", _VERDICT),
                           ("envelope", _ENVELOPE)):
    _parse(_table_name, _text, PROPERTIES)
del _table_name, _text


def opcodes_with(name: str) -> frozenset[str]:
    """The opcodes that have property ``name`` (KeyError for an unknown property)."""
    return PROPERTIES[name].opcodes


def has_property(opcode: str, name: str) -> bool:
    return opcode in PROPERTIES[name].values


def values_of(name: str, convert=str) -> dict[str, object]:
    """Opcode → value of property ``name``, each value passed through ``convert``."""
    return {op: convert(v) for op, v in PROPERTIES[name].values.items()}
