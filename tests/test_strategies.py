"""The program generator: valid by construction (XLA's parser, hloref's verifier and
evaluator accept every module), reaches the opcodes and element types it advertises,
and validates its arguments."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

import hloref
from hloref.fuzz import strategies as S
from hloref.verifier import verify_module

xc = pytest.importorskip("jaxlib.xla_client")

def FAST(n):
    return settings(deadline=None, suppress_health_check=list(HealthCheck), database=None,
                    max_examples=n)


def _opcodes(module):
    return {i.opcode for _, i in module.instructions()}


def _types(module):
    from hloref.shapes import ArrayShape, flatten_shape
    return {s.element_type.name for _, i in module.instructions()
            for s in flatten_shape(i.shape) if isinstance(s, ArrayShape)}


def _accepted_everywhere(module, args):
    text = module.to_text()
    xc.hlo.hlo_module_from_text(text)  # XLA's own parser
    parsed = hloref.parse(text)
    verify_module(parsed)
    assert parsed == hloref.parse(parsed.to_text())  # printer round trip
    hloref.evaluate(parsed, *args)


@FAST(60)
@given(S.modules(), st.data())
def test_generated_modules_parse_verify_and_evaluate(module, data):
    args = data.draw(S.inputs_for(module))
    _accepted_everywhere(module, args)


def test_every_reachable_opcode_is_generated():
    reachable = S.reachable_opcodes() - {"parameter"}
    # everything hloref and the XLA oracle both evaluate that the generator knows about
    assert {"dot", "convolution", "gather", "scatter", "sort", "while", "conditional", "call",
            "reduce", "reduce-window", "select-and-scatter", "map", "opt-barrier", "fft",
            "cholesky", "triangular-solve", "topk", "rng-bit-generator"} <= reachable
    seen = {}

    @FAST(1)
    @given(st.data())
    def run(data):
        for op in sorted(reachable):
            m = data.draw(S.instructions(opcode=op), label=op)
            seen[op] = _opcodes(m)
            _accepted_everywhere(m, S.random_inputs(m, 0))

    run()
    missing = [op for op in reachable if op not in seen[op]]
    assert not missing


@pytest.mark.parametrize("name", S.ALL_ELEMENT_TYPES)
def test_every_element_type_is_generated(name):
    @FAST(3)
    @given(S.modules(element_types=[name], ops=["maximum", "reshape", "slice"],
                     max_instructions=3), st.data())
    def run(module, data):
        assert name in _types(module)
        args = data.draw(S.inputs_for(module))
        if name not in ("s1", "u1"):  # not accepted by the XLA oracle's route
            xc.hlo.hlo_module_from_text(module.to_text())
        hloref.evaluate(hloref.parse(module.to_text()), *args)

    run()


@FAST(25)
@given(S.modules(ops=["while", "conditional", "call", "sort", "scatter", "gather", "dot"],
                 max_instructions=4), st.data())
def test_control_flow_and_indexing_programs(module, data):
    _accepted_everywhere(module, data.draw(S.inputs_for(module)))


@FAST(30)
@given(S.shapes(max_rank=4, max_elements=20))
def test_shapes_respect_bounds(shape):
    assert shape.rank <= 4 and shape.size <= 20


@FAST(20)
@given(S.computations())
def test_computations_are_standalone(comp):
    from hloref.ir import Module
    comp.is_entry = True
    m = Module("m", {comp.name: comp}, comp.name)
    _accepted_everywhere(m, S.random_inputs(m, 1))


def test_special_inputs_and_hints():
    import dataclasses
    from hloref.ir import Computation, Instruction, Module
    from hloref.shapes import ArrayShape
    from hloref.types import ELEMENT_TYPES as T
    params = [Instruction("a", "parameter", ArrayShape(T["f32"], (64,)), parameter_number=0),
              Instruction("b", "parameter", ArrayShape(T["s8"], (64,)), parameter_number=1),
              Instruction("c", "parameter", ArrayShape(T["f64"], (3, 3)), parameter_number=2)]
    comp = Computation("e", params, params[0], is_entry=True)
    m = Module("m", {"e": comp}, "e")
    m.fuzz_hints = {2: "spd"}
    f, i, spd = S.random_inputs(m, 3, "special")
    assert np.isnan(f).any() or np.isinf(f).any() or (f == 0).any()
    assert {-128, 127} & set(i.tolist())
    assert np.all(np.linalg.eigvalsh(spd) > 0)
    normal = S.random_inputs(m, 3, "normal")[0]
    assert np.all(np.isfinite(normal))
    tiny = np.finfo(np.float32).tiny
    assert not np.any((np.abs(normal) > 0) & (np.abs(normal) < tiny))
    del dataclasses


@pytest.mark.parametrize("make", [
    lambda: S.modules(min_instructions=5, max_instructions=2),
    lambda: S.modules(max_instructions=0),
    lambda: S.modules(ops=[]),
    lambda: S.modules(ops=["no-such-op"]),
    lambda: S.modules(weights={"add": -1}),
    lambda: S.modules(element_types=["f99"]),
    lambda: S.modules(max_rank=9),
    lambda: S.shapes(min_rank=3, max_rank=1),
    lambda: S.shapes(max_dim=0),
    lambda: S.element_types(kinds="xyz"),
    lambda: S.instructions(opcode="frobnicate"),
    lambda: S.computations(min_parameters=4, max_parameters=2),
    lambda: S.inputs_for("not a module"),
    lambda: S.scatter_dims([]),
    lambda: S.scatter_dims([2, -1]),
    lambda: S.scatter_dims([2, 3], max_batching_dims=3),
    lambda: S.gather_dims([2], batch_dims=[1, 2]),
    lambda: S.gather_dims([2], min_index_vector_size=2),
    lambda: S.conv_configs(min_spatial=2, max_spatial=1),
    lambda: S.conv_configs(max_spatial=4),
    lambda: S.conv_configs(min_padding=1, max_padding=0),
    lambda: S.conv_configs(max_stride=0),
])
def test_invalid_arguments(make):
    with pytest.raises(InvalidArgument):
        make()


_OPERAND_DIMS = st.lists(st.integers(0, 4), min_size=1, max_size=4)


@FAST(60)
@given(_OPERAND_DIMS, st.booleans(), st.data())
def test_scatter_and_gather_dims_agree_with_shape_inference(dims, general, data):
    from hloref.ir import ProgramShape
    from hloref.shape_inference import infer_shape
    from hloref.shapes import ArrayShape
    from hloref.types import ELEMENT_TYPES as T
    opts = dict(max_batching_dims=1, implicit_index_vector=True) if general else {}
    f32, s32 = T["f32"], T["s32"]
    g = data.draw(S.gather_dims(dims, collapse_unindexed=general,
                                min_index_vector_size=0 if general else 1, **opts))
    got = infer_shape("gather", [ArrayShape(f32, g.operand_dims), ArrayShape(s32, g.indices_dims)],
                      g.attrs())
    assert got.dims == g.result_dims
    sc = data.draw(S.scatter_dims(dims, inserted_unindexed=general, **opts))
    add = ProgramShape((ArrayShape(f32, ()), ArrayShape(f32, ())), ArrayShape(f32, ()))
    got = infer_shape("scatter", [ArrayShape(f32, sc.operand_dims), ArrayShape(s32, sc.indices_dims),
                                  ArrayShape(f32, sc.updates_dims)],
                      {**sc.attrs(), "to_apply": "add"}, {"to_apply": add})
    assert got.dims == sc.operand_dims


@FAST(60)
@given(S.conv_configs(min_spatial=0, max_spatial=3, max_stride=3, min_padding=-2,
                      max_base_dilation=3))
def test_conv_configs_agree_with_shape_inference(c):
    from hloref.shape_inference import infer_shape
    from hloref.shapes import ArrayShape
    from hloref.types import ELEMENT_TYPES as T
    out = infer_shape("convolution", [ArrayShape(T["f32"], c.lhs_dims),
                                      ArrayShape(T["f32"], c.rhs_dims)], c.attrs())
    dn = c.dim_labels
    assert out.dims[dn.output_feature_dimension] == c.rhs_dims[dn.kernel_output_feature_dimension]
    assert out.dims[dn.output_batch_dimension] * c.batch_group_count == \
        c.lhs_dims[dn.input_batch_dimension]
