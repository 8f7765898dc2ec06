"""Tests of the HLO text parser and printer against text that XLA itself produced.

Every round trip is checked three ways: ``parse(print(m)) == m`` (structural),
``print(parse(print(m))) == print(m)`` (fixed point), and XLA's own parser
(``xla_client.hlo.hlo_module_from_text``) accepts the printed text.

This file: hand-written modules of every form (shapes, async sugar, collectives,
attributes, headers), the error messages, and fuzzing of the parser; modules that jax,
TensorFlow and XLA's pass dumps produced: test_parser_produced_modules.py; literal
values: test_parser_literals.py.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from hloref import attrs as A
from hloref.errors import HloParseError
from hloref.parser import OPCODES, parse_literal, parse_module, parse_shape
from hloref.printer import module_to_text, shape_to_text
from hloref.shapes import UNBOUNDED, BufferShape, Layout, TupleShape
from hloref.types import ELEMENT_TYPES

from parser_common import roundtrip


EDGE = """\
HloModule edge, is_scheduled=false, replica_count=1, num_partitions=1, entry_computation_layout={(f32[8,128]{1,0:T(8,128)}, s32[])->(f32[8,128]{1,0:T(8,128)}, pred[])}, frontend_attributes={a="b"}

FileNames
1 "/tmp/a.py"
2 "/tmp/b.py"

FunctionNames
1 "f"
2 "<module>"

FileLocations
1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=2 end_column=9}
2 {file_name_id=2 function_name_id=2 line=10 end_line=10 column=0 end_column=4}

StackFrames
1 {file_location_id=2 parent_frame_id=1}
2 {file_location_id=1 parent_frame_id=2}

%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %add = f32[] add(f32[] %x, f32[] %y), metadata={op_name="add" stack_frame_id=2}
}

ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GE, type=TOTALORDER
}

ENTRY %main (p0: f32[8,128], p1: s32[]) -> (f32[8,128], pred[]) {
  %p0 = f32[8,128]{1,0:T(8,128)} parameter(0)
  %p1 = s32[] parameter(1)
  %nan = f32[4]{0} constant({nan, -nan, nan(0x1234), -nan(0x7fffff)})
  %bf = bf16[2,3]{0,1} constant({ { 1, 0.1, -inf }, { 3.38953139e+38, 1e-40, -0 } })
  %elided = f32[16]{0} constant({...})
  %tup = (s32[], f16[2]) constant((7, {0.5, 65504}))
  %z = f32[2,0]{1,0} constant({ {}, {} })
  %z0 = f32[0]{0} constant({})
  %cpx = c64[2]{0} constant({(1, -2.5), (inf, nan)})
  %u = u64[] constant(18446744073709551615)
  %pr = pred[3]{0} constant({true, false, 1})
  %i4 = s4[4]{0:E(4)} constant({-8, -1, 0, 7})
  %x0 = f32[] constant(0)
  %reduce = f32[8]{0} reduce(%p0, %x0), dimensions={1}, to_apply=%add
  %bcast = f32[8,128]{1,0} broadcast(%reduce), dimensions={0}
  %sl = f32[4,64]{1,0} slice(%bcast), slice={[0:8:2], [0:128:2]}
  %pad = f32[6,67]{1,0} pad(%sl, %x0), padding=1_1x0_2_1
  %gt = pred[] compare(%x0, %x0), direction=GT, control-predecessors={%pad, %sl}
  ROOT %t = (f32[8,128]{1,0:T(8,128)}, pred[]) tuple(%p0, %gt)
}
"""


def test_edge_module():
    m = roundtrip(EDGE)
    assert m.name == "edge" and m.entry_name == "main" and m.entry.is_entry
    assert m.attrs["is_scheduled"] is False and m.attrs["replica_count"] == 1
    assert isinstance(m.attrs["frontend_attributes"], A.Raw)
    assert m.attrs["frontend_attributes"] == '{a="b"}'
    ecl = m.attrs["entry_computation_layout"]
    assert ecl.parameters[0].layout == Layout((1, 0), ((8, 128),))
    assert [t for t, _ in m.extra_sections] == ["FileNames", "FunctionNames", "FileLocations", "StackFrames"]
    assert m.extra_sections[1][1] == '1 "f"\n2 "<module>"'
    assert list(m.computations) == ["add", "ge", "main"]
    ge = m.computations["ge"]
    assert not ge.has_signature and ge.root.name == "c"
    assert ge.root.attrs == {"direction": "GE", "type": "TOTALORDER"}
    assert isinstance(ge.root.attrs["direction"], A.Enum)
    add = m.computations["add"].root
    assert add.operands_with_shapes and [o.name for o in add.operands] == ["x", "y"]
    e = m.entry
    ins = {i.name: i for i in e.instructions}
    assert [i.name for i in e.instructions][:3] == ["p0", "p1", "nan"]  # text order kept
    assert ins["p1"].parameter_number == 1 and ins["p0"].line == 32
    assert EDGE.splitlines()[31].startswith("  %p0 = ")
    nan_bits = ins["nan"].literal.view(np.uint32).tolist()
    assert nan_bits == [0x7FC00000, 0xFFC00000, 0x7F801234, 0xFFFFFFFF]
    bf = ins["bf"].literal
    assert bf.dtype == ml_dtypes.bfloat16 and bf.shape == (2, 3)
    expect = np.array([[1, 0.1, -np.inf], [3.38953139e38, 1e-40, -0.0]]).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(bf.view(np.uint16), expect.view(np.uint16))
    assert ins["bf"].shape.layout.minor_to_major == (0, 1)
    assert ins["elided"].literal is None
    t = ins["tup"].literal
    assert int(t[0]) == 7 and t[0].dtype == np.int32
    np.testing.assert_array_equal(t[1], np.array([0.5, 65504], np.float16))
    assert ins["z"].literal.shape == (2, 0) and ins["z0"].literal.shape == (0,)
    cpx = ins["cpx"].literal
    assert cpx[0] == np.complex64(1 - 2.5j) and np.isinf(cpx[1].real) and np.isnan(cpx[1].imag)
    assert ins["u"].literal.dtype == np.uint64 and int(ins["u"].literal) == 2**64 - 1
    assert ins["pr"].literal.tolist() == [True, False, True]
    assert ins["i4"].literal.dtype == ml_dtypes.int4 and ins["i4"].shape.layout.element_size_bits == 4
    assert ins["reduce"].operands[1] is ins["x0"]
    assert ins["reduce"].attrs["to_apply"] == "add"
    assert ins["sl"].attrs["slice"] == (A.SliceDim(0, 8, 2), A.SliceDim(0, 128, 2))
    assert ins["pad"].attrs["padding"] == (A.PaddingDim(1, 1, 0), A.PaddingDim(0, 2, 1))
    assert [c.name for c in ins["gt"].control_predecessors] == ["pad", "sl"]
    assert e.root is ins["t"]
    # printed text keeps the non-default NaN payloads and the stack frame tables
    text = module_to_text(m)
    assert "constant({nan, -nan, nan(0x1234), -nan(0x7fffff)})" in text
    assert "StackFrames\n1 {file_location_id=2 parent_frame_id=1}\n" in text


def test_no_entry_takes_last_computation():
    m = roundtrip("HloModule m\n\nc1 {\n  ROOT a = f32[] constant(1)\n}\n\nc2 {\n  ROOT b = s32[] constant(2)\n}\n")
    assert m.entry_name == "c2" and m.entry.is_entry
    assert m.entry.root.literal.dtype == np.int32


def test_forward_reference():
    # hloref resolves operands after reading the whole computation; XLA's parser
    # wants definitions first, so no XLA check here
    m = roundtrip("HloModule m\nENTRY e {\n  ROOT n = f32[] negate(c)\n  c = f32[] constant(2)\n}\n",
                  check_xla=False)
    assert m.entry.root.operands[0] is m.entry.instructions[1]


def test_root_not_last():
    m = roundtrip("HloModule m\nENTRY e {\n  ROOT a = f32[] constant(1)\n  b = f32[] constant(2)\n}\n")
    assert m.entry.root.name == "a"


SHAPES = [
    "f32[2,3]{1,0}",
    "f32[2,3]{0,1:T(8,128)(2,1)L(4)E(32)S(1)}",
    "bf16[16,256]{1,0:T(8,128)(2,1)}",
    "s4[128]{0:E(4)}",
    "f32[<=5,3]{1,0}",
    "f32[?,3]",
    "(f32[], (s32[2]{0}, token[]), ())",
    "()",
    "token[]",
    "opaque[]",
    "b(f32[4]{0})",
    "u8[3,4]{1,0:D(D,C)T(8,*)M(8)}",
    "f8e4m3fn[8]",
    "f4e2m1fn[2,2]{1,0}",
    "f8e8m0fnu[]",
]


@pytest.mark.parametrize("text", SHAPES)
def test_shape_roundtrip(text):
    s = parse_shape(text)
    assert shape_to_text(s) == text
    assert parse_shape(shape_to_text(s)) == s


def test_shape_details():
    s = parse_shape("f32[2,3]{0,1:T(8,128)(2,1)L(4)E(32)S(1)}")
    assert s.layout == Layout((0, 1), ((8, 128), (2, 1)), 32, 1, (("L", "4"),))
    s = parse_shape("f32[<=5,?,3]")
    assert s.dims == (5, UNBOUNDED, 3) and s.dynamic == (True, True, False) and s.layout is None
    assert parse_shape("u8[3,4]{1,0:T(8,*)}").layout.tiles == ((8, -1),)
    assert parse_shape("f32[]").layout is None
    assert parse_shape("opaque_type[]").to_text() == "opaque[]"
    assert isinstance(parse_shape("b(f32[4])"), BufferShape)
    assert parse_shape("()") == TupleShape(())
    for name, et in ELEMENT_TYPES.items():
        if et.is_array:
            assert parse_shape(f"{name}[1]").element_type is et


def test_xla_accepts_edge_shapes():
    text = ("HloModule m\nENTRY e {\n  p = f32[<=5,3]{1,0} parameter(0)\n  q = f32[?,3]{1,0} parameter(1)\n"
            "  r = (f32[], (s32[2]{0}, token[]), ()) parameter(2)\n"
            "  ROOT t = s4[128]{0:E(4)} parameter(3)\n}\n")
    roundtrip(text)


ASYNC = """\
HloModule async

%wrapped (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%p)
}

ENTRY %main (a: f32[4]) -> f32[4] {
  %a = f32[4]{0} parameter(0)
  %s = ((f32[4]{0}), f32[4]{0}, s32[]) async-start(%a), calls=%wrapped
  %d = f32[4]{0} async-done(%s)
  %cs = ((f32[4]{0}), f32[4]{0}, u32[]) custom-call-start(%d), custom_call_target="foo", backend_config="{\\"x\\": 1}"
  %cu = ((f32[4]{0}), f32[4]{0}, u32[]) custom-call-update(%cs)
  ROOT %cd = f32[4]{0} custom-call-done(%cu)
}
"""


def test_async_sugar():
    m = roundtrip(ASYNC, check_xla=False)
    ins = {i.name: i for i in m.entry.instructions}
    assert ins["s"].opcode == "async-start" and ins["s"].async_wrapped_opcode is None
    assert ins["s"].attrs["calls"] == "wrapped"
    assert ins["cs"].opcode == "async-start" and ins["cs"].async_wrapped_opcode == "custom-call"
    assert ins["cs"].attrs["custom_call_target"] == "foo"
    assert ins["cs"].attrs["backend_config"] == '"{\\"x\\": 1}"'
    assert ins["cu"].opcode == "async-update" and ins["cd"].opcode == "async-done"
    text = module_to_text(m)
    assert "custom-call-start(%d)" in text and "custom-call-done(%cu)" in text
    assert "async-start(%a), calls=%wrapped" in text


def test_async_sugar_xla_accepts():
    # plain async-start with calls= is valid for XLA too
    text = ASYNC.split("  %cs")[0] + "}\n"
    text = text.replace("ROOT %d", "%d").replace("%d = f32[4]{0} async-done(%s)",
                                                 "ROOT %d = f32[4]{0} async-done(%s)")
    roundtrip(text)


COLLECTIVES = """\
HloModule coll, replica_count=4

%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (x: f32[8]) -> (f32[8], f32[8], f32[8], f32[8], f32[32]) {
  %x = f32[8]{0} parameter(0)
  %ar = f32[8]{0} all-reduce(%x), channel_id=1, replica_groups={{0,1},{2,3}}, to_apply=%sum
  %ar2 = f32[8]{0} all-reduce(%x), replica_groups=[2,2]<=[4], to_apply=%sum
  %ar3 = f32[8]{0} all-reduce(%x), replica_groups=[2,2]<=[2,2]T(1,0), to_apply=%sum
  %ar4 = f32[8]{0} all-reduce(%x), replica_groups={}, to_apply=%sum
  %ag = f32[32]{0} all-gather(%x), dimensions={0}, replica_groups={{0,1,2,3}}
  %cp = f32[8]{0} collective-permute(%x), source_target_pairs={{0,1},{1,2},{2,3},{3,0}}
  ROOT %t = (f32[8]{0}, f32[8]{0}, f32[8]{0}, f32[8]{0}, f32[32]{0}) tuple(%ar, %ar2, %ar3, %cp, %ag)
}
"""


def test_collectives():
    m = roundtrip(COLLECTIVES)
    assert m.replica_count == 4
    ins = {i.name: i for i in m.entry.instructions}
    assert ins["ar"].attrs["replica_groups"].groups == ((0, 1), (2, 3))
    assert ins["ar"].attrs["channel_id"] == 1
    assert ins["ar2"].attrs["replica_groups"].groups == ((0, 1), (2, 3))
    assert ins["ar3"].attrs["replica_groups"].groups == ((0, 2), (1, 3))
    assert ins["ar3"].attrs["replica_groups"].text == "[2,2]<=[2,2]T(1,0)"
    assert ins["ar4"].attrs["replica_groups"].groups == ()
    assert ins["cp"].attrs["source_target_pairs"] == ((0, 1), (1, 2), (2, 3), (3, 0))


@pytest.mark.parametrize("text, groups", [
    # XLA's MeshAxesReplicaGroupList (replica_group.cc, get_replica_groups_for_full_axes):
    # the device order (device_ids, else 0..n-1) reshaped to the mesh, the named axes
    # transposed last in the order named, rows of the group size. By hand for a 2x2 mesh
    # laid out (a, b): (0,0)=3, (0,1)=1, (1,0)=2, (1,1)=0 with device_ids=(3,1,2,0).
    ("mesh['a'=2,'b'=2] {'b'}", ((0, 1), (2, 3))),
    ("mesh['a'=2,'b'=2] {'a'}", ((0, 2), (1, 3))),
    ("mesh['a'=2,'b'=2] {'b','a'}", ((0, 2, 1, 3),)),
    ("mesh['a'=2,'b'=2], device_ids=(3,1,2,0) {'a'}", ((3, 2), (1, 0))),
    ("mesh['a'=2,'b'=3] {}", ((0,), (1,), (2,), (3,), (4,), (5,))),
    ("mesh['x'=4] {'x':(1)2}", None),  # a sub-axis: not expanded (the evaluator says so)
])
def test_mesh_axes_replica_groups(text, groups):
    module = parse_module(f"""HloModule m, replica_count=6
add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}}
ENTRY e {{
  x = f32[2] parameter(0)
  ROOT ar = f32[2] all-reduce(x), replica_groups={text}, to_apply=add
}}
""")
    rg = module.entry.root.attrs["replica_groups"]
    assert rg.text == text and rg.groups == groups
    assert text in module_to_text(module)


MISC = """\
HloModule misc

%cmp (a: f32[], b: f32[], c: s32[], d: s32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  %c = s32[] parameter(2)
  %d = s32[] parameter(3)
  ROOT %lt = pred[] compare(%a, %b), direction=LT
}

%mx (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %m = f32[] maximum(%a, %b)
}

ENTRY %main (x: f32[2,8,8,3], k: f32[3,3,3,4], v: f32[8], i: s32[8]) -> f32[8] {
  %x = f32[2,8,8,3]{3,2,1,0} parameter(0)
  %k = f32[3,3,3,4]{3,2,1,0} parameter(1)
  %conv = f32[2,4,8,4]{3,2,1,0} convolution(%x, %k), window={size=3x3 stride=2x1 pad=1_1x1_1 rhs_dilate=1x1}, dim_labels=b01f_01io->b01f, feature_group_count=1, operand_precision={high,highest}
  %v = f32[8]{0} parameter(2)
  %i = s32[8]{0} parameter(3)
  %sorted = (f32[8]{0}, s32[8]{0}) sort(%v, %i), dimensions={0}, is_stable=true, to_apply=%cmp
  %init = f32[] constant(-inf)
  %rw = f32[8]{0} reduce-window(%v, %init), window={size=3 pad=1_1}, to_apply=%mx
  %io = s32[8]{0} iota(), iota_dimension=0
  %rp = f32[8]{0} reduce-precision(%rw), exponent_bits=5, mantissa_bits=10
  %gte = f32[8]{0} get-tuple-element(%sorted), index=0
  %cc = f32[8]{0} custom-call(%gte), custom_call_target="my\\ttarget", api_version=API_VERSION_STATUS_RETURNING
  ROOT %out = f32[8]{0} add(%cc, %rp), sharding={replicated}
}
"""


def test_misc_attributes():
    m = roundtrip(MISC)
    ins = {i.name: i for i in m.entry.instructions}
    conv = ins["conv"]
    w = conv.attrs["window"]
    assert w.dims[0] == A.WindowDim(3, 2, 1, 1, 1, 1, False)
    assert conv.attrs["feature_group_count"] == 1
    assert conv.attrs["operand_precision"] == ("high", "highest")
    assert ins["sorted"].attrs["is_stable"] is True
    assert ins["rw"].attrs["window"] == A.Window((A.WindowDim(3, 1, 1, 1),))
    assert ins["io"].attrs["iota_dimension"] == 0
    assert ins["rp"].attrs["exponent_bits"] == 5
    assert ins["gte"].attrs["index"] == 0
    assert ins["cc"].attrs["custom_call_target"] == "my\ttarget"
    assert isinstance(ins["cc"].attrs["api_version"], A.Raw)
    assert ins["out"].attrs["sharding"] == "{replicated}"
    assert ins["init"].literal == -np.inf


HEADER = """\
HloModule hdr, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}, must-alias) }, buffer_donor={ (2, {}) }, entry_computation_layout={(f32[4]{0}, f32[4]{0}, f32[4]{0})->(f32[4]{0}, f32[4]{0})}, frontend_attributes={xla.sdy.meshes="{}"}

ENTRY %main (a: f32[4], b: f32[4], c: f32[4]) -> (f32[4], f32[4]) {
  %a = f32[4]{0} parameter(0), sharding={replicated}
  %b = f32[4]{0} parameter(1), frontend_attributes={k="v, w"}
  %c = f32[4]{0} parameter(2)
  %cc = f32[4]{0} custom-call(%a, %c), custom_call_target="foo", backend_config={"a": [1, 2], "b": "x,y"}, api_version=API_VERSION_TYPED_FFI, metadata={op_name="jit(f)/x" source_file="/a/b.py" source_line=3}
  ROOT %t = (f32[4]{0}, f32[4]{0}) tuple(%cc, %b)
}
"""


def test_header_and_raw_attributes():
    m = roundtrip(HEADER)
    assert m.attrs["input_output_alias"] == "{ {0}: (0, {}, may-alias), {1}: (1, {}, must-alias) }"
    assert m.attrs["buffer_donor"] == "{ (2, {}) }"
    assert isinstance(m.attrs["frontend_attributes"], A.Raw)
    cc = m.entry.instruction("cc")
    assert cc.attrs["backend_config"] == '{"a": [1, 2], "b": "x,y"}'
    assert cc.attrs["metadata"] == '{op_name="jit(f)/x" source_file="/a/b.py" source_line=3}'
    assert m.entry.instruction("b").attrs["frontend_attributes"] == '{k="v, w"}'
    assert list(cc.attrs) == ["custom_call_target", "backend_config", "api_version", "metadata"]


def test_execution_thread_and_comments():
    text = ("HloModule m\n\n%c (a: f32[]) -> f32[] {\n"
            "  %a = f32[] parameter(0)  // a comment\n  ROOT %n = f32[] negate(%a)\n}, execution_thread=\"host\"\n\n"
            "ENTRY %e (p: f32[]) -> (f32[], f32[]) {\n  %p = f32[] parameter(0)\n"
            "  %c = f32[] call(%p), to_apply=%c\n  ROOT %t = (f32[], /*index=1*/f32[]) tuple(%p, /*index=1*/%c)\n}\n")
    m = roundtrip(text)
    assert m.computations["c"].attrs == {"execution_thread": "host"}


def parse_error(text: str) -> HloParseError:
    with pytest.raises(HloParseError) as info:
        parse_module(text, "t.hlo")
    return info.value


def body(*lines: str) -> str:
    return "HloModule m\n\nENTRY e {\n" + "\n".join("  " + ln for ln in lines) + "\n}\n"


@pytest.mark.parametrize("text,message,line,column", [
    (body("ROOT a = f32[2 3] parameter(0)"), "expected ']' after dimensions, found '3'", 4, 18),
    (body("ROOT a = f33[2] parameter(0)"), "unknown element type 'f33'", 4, 12),
    (body("ROOT a = f32[2] frobnicate(b)"), "unknown opcode 'frobnicate'", 4, 19),
    (body("ROOT a = f32[2] negate(nope)"), "unknown instruction 'nope' in computation 'e'", 4, 26),
    (body("a = f32[] constant(1)", "a = f32[] constant(2)"), "duplicate instruction name 'a' in computation 'e'", 5, 3),
    (body("ROOT a = f32[] add(b, b), to_apply=x, to_apply=y"), "duplicate attribute 'to_apply'", 4, 41),
    (body("ROOT a = f32[] call(), to_apply=%missing"), "unknown computation 'missing'", 4, 35),
    (body("ROOT a = f16[] constant(1e6)"), "value 1e6 is out of range for f16", 4, 27),
    (body("ROOT a = s8[] constant(300)"), "value 300 is out of range for s8 [-128, 127]", 4, 26),
    (body("ROOT a = u8[] constant(-1)"), "value -1 is out of range for u8 [0, 255]", 4, 26),
    (body("ROOT a = f32[2] constant({1, 2, 3})"), "literal dimension 0 has 3 elements, but the shape says 2", 4, 28),
    (body("ROOT a = f32[2,2] constant({1, 2})"), "expected '{' for dimension 1 of the literal (rank 2), found '1'", 4, 31),
    (body("ROOT a = f32[] constant(nan(0x800000))"), "NaN payload 0x800000 does not fit in the 23 mantissa bits of f32", 4, 27),
    (body("ROOT a = f8e4m3fn[] constant(nan(0x1))"), "f8e4m3fn has no NaN payload bits; payload 0x1 is not allowed", 4, 32),
    (body("ROOT a = s32[] constant(1.5)"), "expected an integer for s32, found '1.5'", 4, 27),
    (body('ROOT a = f32[] custom-call(), custom_call_target="abc'), "unterminated string", 4, 52),
    ("HloModule m\nENTRY e {\n  ROOT a = f32[] negate(b), metadata={op_name=\"x\"\n",
     "unterminated '{': expected '}' before end of input", 3, 38),
    ("HloModule m\nENTRY e {\n  ROOT a = f32[] constant(1)\n", "expected '}' to end computation 'e', found end of input", 4, 1),
    ("HloModel m\n", "expected 'HloModule' at the start of the module, found 'HloModel'", 1, 1),
    (body("ROOT a = f32[2]{1,0} parameter(0)"), "layout has 2 dimensions but the shape has rank 1", 4, 22),
    (body("ROOT a = f32[] all-reduce-start-done(b)"), "unknown opcode 'all-reduce-start-done'", 4, 18),
    (body("ROOT a = f32[] copy-update(b)"), "unknown opcode 'copy-update'", 4, 18),
    (body("a = f32[] constant(1)", "ROOT  a = f32[] constant(2)"), "duplicate instruction name 'a' in computation 'e'", 5, 9),
    (body("ROOT s4 = f32[] constant(1)"), "illegal instruction name 's4' (it is an element type)", 4, 8),
])
def test_errors(text, message, line, column):
    e = parse_error(text)
    assert e.message == message
    assert (e.line, e.column) == (line, column)
    assert e.source_line == (text.splitlines() + [""])[line - 1]
    assert e.filename == "t.hlo"
    assert str(e).startswith(f"t.hlo:{line}:{column}: {message}")


@pytest.mark.parametrize("type_name,text", [
    ("f16", "65520"), ("bf16", "3.4e39"), ("f32", "3.5e38"), ("f8e4m3fn", "480"), ("f8e5m2", "61440"),
    ("f8e4m3fnuz", "248"), ("f4e2m1fn", "7"), ("f64", "1e400"), ("s4", "8"), ("u4", "16"),
    ("s64", "18446744073709551616"), ("u64", "18446744073709551616"), ("u64", "-9223372036854775809"),
        ("u32", "-1"), ("s32", "4294967295"), ("f8e8m0fnu", "-1"),
])
def test_out_of_range_constants(type_name, text):
    with pytest.raises(HloParseError, match="out of range|cannot be represented"):
        parse_literal(text, f"{type_name}[]")
    with pytest.raises(HloParseError):
        parse_module(body(f"ROOT a = {type_name}[] constant({text})"))


def test_largest_in_range_values_round():
    # just below the overflow threshold: rounds to the max finite value
    assert parse_literal("65519.99", "f16[]") == np.float16(65504)
    assert parse_literal("6.99", "f4e2m1fn[]").astype(float) == 6.0
    assert parse_literal("463.9", "f8e4m3fn[]").astype(float) == 448.0


def test_parse_module_rejects_non_str():
    with pytest.raises(HloParseError):
        parse_module(b"HloModule m")  # type: ignore[arg-type]


def test_opcode_table():
    assert len(OPCODES) == 136
    for op in ("exponential", "count-leading-zeros", "opt-barrier", "popcnt", "atan", "shuffle",
               "collective-reduce", "scaled-dot", "scan"):
        assert op in OPCODES


hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_SEEDS = [EDGE, ASYNC, COLLECTIVES, MISC]


_TOKENS = ["{", "}", "(", ")", "[", "]", ",", "=", "%", "\"", "<=", "?", ":", "->", "/*", "ROOT",
           "ENTRY", "nan(0x", "-", "1e999", "{...}", "T(", "E(", "x", "_", "\n", " ", "0", "f32[",
           "constant(", "parameter(", "-start", "b(", "()", "\\"]


@st.composite
def mutated(draw):
    text = draw(st.sampled_from(_SEEDS))
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(["delete", "insert", "replace", "dup"]))
        n = draw(st.integers(1, 8))
        if op == "delete":
            text = text[:pos] + text[pos + n:]
        elif op == "insert":
            text = text[:pos] + draw(st.sampled_from(_TOKENS)) + text[pos:]
        elif op == "replace":
            text = text[:pos] + draw(st.text(max_size=3)) + text[pos + n:]
        else:
            text = text[:pos] + text[pos:pos + n] * 2 + text[pos + n:]
    return text


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(mutated())
def test_fuzz_only_parse_errors(text):
    try:
        m = parse_module(text)
    except HloParseError as e:
        assert "internal parser error" not in e.message, e.message
        assert e.line is not None and e.line >= 1 and e.column >= 1
        return
    # whatever parses must print and reparse to the same module
    out = module_to_text(m)
    assert parse_module(out) == m


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_fuzz_random_text(text):
    try:
        parse_module("HloModule m\nENTRY e {\n  ROOT a = " + text + "\n}\n")
    except HloParseError as e:
        assert "internal parser error" not in e.message, e.message
