"""Forms of HLO text that XLA's parser accepts beyond what XLA prints, checked against
XLA's parser itself: hloref must read each the way XLA does.

For each text T: XLA parses T and prints it with every shape and literal spelled
out; hloref's reading of T must give every named instruction the shape (and every
constant the value) hloref reads from XLA's fully explicit print, and hloref's own
print of T must be accepted by XLA.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import hloref
from hloref.errors import HloParseError
from hloref.parser import parse_module
from hloref.printer import module_to_text
from hloref.shape_inference import same_shape

xc = pytest.importorskip("jaxlib.xla_client")


def _xla_text(text: str) -> str:
    return xc.hlo.hlo_module_from_text(text).to_string()


def check_like_xla(text: str):
    text = textwrap.dedent(text)
    ours = parse_module(text)
    theirs = parse_module(_xla_text(text))
    for comp in ours.computations.values():
        if comp.name.startswith("_inline."):
            continue
        other = theirs.computations[comp.name]
        for instr in comp.instructions:
            if ".anon" in instr.name:
                continue
            want = other.instruction(instr.name)
            assert same_shape(instr.shape, want.shape), (instr.name, instr.shape, want.shape)
            assert instr.opcode == want.opcode
            if instr.opcode == "constant":
                np.testing.assert_array_equal(instr.literal, want.literal)
    xc.hlo.hlo_module_from_text(module_to_text(ours))  # XLA accepts hloref's print
    assert parse_module(module_to_text(ours)) == ours
    return ours, theirs


def test_module_without_header_is_named_after_entry():
    ours, theirs = check_like_xla("""
        add {
          a = f32[] parameter(0)
          b = f32[] parameter(1)
          ROOT c = f32[] add(a, b)
        }
        ENTRY main {
          ROOT p = f32[2] parameter(0)
        }
        """)
    assert ours.name == theirs.name == "module_main"


def test_shapes_inferred_like_xla():
    check_like_xla("""
        HloModule m
        add {
          a = f32[] parameter(0)
          b = f32[] parameter(1)
          ROOT c = add(a, b)
        }
        ENTRY e {
          p = f32[4,3] parameter(0)
          q = f32[4,3] parameter(1)
          s = add(p, q), sharding={replicated}
          cmp = compare(p, q), direction=LT
          t = transpose(s), dimensions={1,0}
          d = dot(p, t), lhs_contracting_dims={1}, rhs_contracting_dims={0}
          z = f32[] constant(0)
          r = reduce(s, z), dimensions={1}, to_apply=add
          bc = broadcast(z), dimensions={2,5}
          sel = select(cmp, p, q)
          tu = tuple(d, r, bc, sel)
          ROOT g = get-tuple-element(tu), index=1
        }
        """)


def test_nested_instruction_operands():
    ours, _ = check_like_xla("""
        HloModule m
        ENTRY e {
          p = f32[16,32] parameter(0)
          b = f32[16,32] broadcast(f32[32] parameter(1)), dimensions={1}
          ROOT out = f32[16,32] add(b, negate(p))
        }
        """)
    entry = ours.entry
    assert [p.parameter_number for p in entry.parameters] == [0, 1]
    x = np.arange(32, dtype=np.float32)
    p = np.ones((16, 32), np.float32)
    np.testing.assert_array_equal(hloref.evaluate(ours, p, x), x[None, :] - p)


@pytest.mark.parametrize("shape,literal,want", [
    ("s32[2,2]", "3", [[3, 0], [0, 0]]),        # XLA: the first element, the rest zero
    ("s32[3,1]", "3", [[3], [0], [0]]),
    ("pred[2]", "true", [True, False]),
    ("u64[]", "-1", 18446744073709551615),      # 64-bit literals wrap modulo 2^64
    ("s64[]", "18446744073709551615", -1),
    ("s64[]", "9223372036854775808", -9223372036854775808),
    ("s32[2,2]", "{{1,2}{3,4}}", [[1, 2], [3, 4]]),   # a missing ',' between rows
])
def test_literal_forms_like_xla(shape, literal, want):
    ours, _ = check_like_xla(f"""
        HloModule m
        ENTRY e {{
          ROOT c = {shape} constant({literal})
        }}
        """)
    assert ours.entry.root.literal.tolist() == want


def test_inline_computations_and_old_signatures():
    ours, _ = check_like_xla("""
        HloModule m:
        ENTRY %e (a f32[4], b: f32[4]) -> f32[] {
          a = f32[4] parameter(0)
          b = f32[4] parameter(1)
          z = f32[] constant(0)
          s = f32[4] add(a, b)
          ROOT r = f32[] reduce(s, z), dimensions={0}, to_apply={
            x = f32[] parameter(0)
            y = f32[] parameter(1)
            ROOT m = f32[] maximum(x, y)
          }
        }
        """)
    a = np.array([1, 5, -2, 0], np.float32)
    assert hloref.evaluate(ours, a, a) == np.float32(10)


def test_space_between_element_type_and_dimensions():
    check_like_xla("""
        HloModule m
        ENTRY e {
          ROOT p = s32 [5,2] parameter(0)
        }
        """)


@pytest.mark.parametrize("text,message", [
    ("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT c = convert(p)\n}\n",
     "'convert' needs its shape"),
    ("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  q = f32[3] parameter(1)\n"
     "  ROOT c = add(p, q)\n}\n", "cannot infer the shape of 'c'"),
])
def test_uninferable_shapes_are_parse_errors(text, message):
    with pytest.raises(Exception):
        xc.hlo.hlo_module_from_text(text)
    with pytest.raises(HloParseError, match=message):
        parse_module(text)


def test_boolean_and_enum_attributes_are_typed():
    from hloref import attrs as A
    text = """HloModule m
ENTRY e {
  a = f32[3,3] parameter(0)
  b = f32[3,2] parameter(1)
  ROOT x = f32[3,2] triangular-solve(a, b), left_side=true, lower=false, unit_diagonal=true, transpose_a=TRANSPOSE
}
"""
    ours, _ = check_like_xla(text)
    attrs = ours.entry.root.attrs
    assert attrs["left_side"] is True and attrs["lower"] is False and attrs["unit_diagonal"] is True
    assert isinstance(attrs["transpose_a"], A.Enum) and attrs["transpose_a"] == "TRANSPOSE"
    bad = text.replace("lower=false", "lower=maybe")
    with pytest.raises(Exception):
        xc.hlo.hlo_module_from_text(bad)
    with pytest.raises(HloParseError, match="'true' or 'false'"):
        parse_module(bad)


def test_sugared_async_call_with_inline_computation_verifies():
    from hloref.verifier import verify_module
    text = """HloModule m
ENTRY main {
  arg.0 = s32[] parameter(0)
  call-start.0 = ((s32[]), s32[], s32[]) call-start(arg.0), to_apply={
    a = s32[] parameter(0)
    ROOT n = s32[] negate(a)
  }
  ROOT call-done.0 = s32[] call-done(call-start.0)
}
"""
    ours, _ = check_like_xla(text)
    assert verify_module(ours, collect=True) == []
    assert hloref.evaluate(ours, np.int32(4)) == -4


SCAN_FORWARD = """HloModule scan_module
add {
  input = f32[] parameter(0)
  acc = f32[] parameter(1)
  add = f32[] add(acc, input)
  ROOT t = (f32[], f32[]) tuple(add, add)
}
ENTRY Scan {
  input = f32[4]{0} parameter(0)
  init = f32[] constant(0)
  ROOT scan = (f32[4]{0}, f32[]) scan(input, init), dimensions={0}, num_carries=1, is_reverse=false, to_apply=add, is_associative=true
}
"""


def test_scan_flags_written_false_are_false():
    """scan_expander_test.cc:116: ``is_reverse=false`` spelled out once read as raw text
    (truthy), so the scan ran backwards. A forward prefix sum, by hand and by XLA:CPU."""
    ours = parse_module(SCAN_FORWARD)
    xc.hlo.hlo_module_from_text(module_to_text(ours))  # XLA accepts hloref's print
    assert parse_module(module_to_text(ours)) == ours
    attrs = ours.entry.root.attrs
    assert attrs["is_reverse"] is False and attrs["is_associative"] is True
    assert attrs["num_carries"] == 1
    x = np.array([1, 2, 4, 8], np.float32)
    out = hloref.evaluate(ours, x)
    np.testing.assert_array_equal(out[0], [1, 3, 7, 15])
    assert out[1] == 15
    from hloref.fuzz.oracles.xla import available, run_hlo
    if available():
        xla = run_hlo(SCAN_FORWARD, x)
        np.testing.assert_array_equal(xla[0], out[0])
        np.testing.assert_array_equal(xla[1], out[1])
    reverse = hloref.evaluate(SCAN_FORWARD.replace("is_reverse=false", "is_reverse=true"), x)
    np.testing.assert_array_equal(reverse[0], [15, 14, 12, 8])


RBG_ARRAY = """HloModule m
ENTRY main {
  seed = u64[2] parameter(0)
  ROOT rbg = u32[4,8] rng-bit-generator(seed), algorithm=rng_default
}
"""


def test_rng_bit_generator_declared_as_bits_alone():
    """sharding_propagation_test.cc:12609 declares ``rng-bit-generator`` with the bits'
    array shape instead of the (state, bits) tuple; XLA's parser accepts it and XLA:CPU
    returns the bits, those of the tuple form."""
    seed = np.array([42, 7], np.uint64)
    ours = hloref.evaluate(RBG_ARRAY, seed)
    tuple_form = RBG_ARRAY.replace("u32[4,8] rng", "(u64[2], u32[4,8]) rng")
    from hloref.fuzz.oracles.xla import available, run_hlo
    if not available():
        pytest.skip("no XLA:CPU")
    np.testing.assert_array_equal(ours, run_hlo(RBG_ARRAY, seed))
    np.testing.assert_array_equal(ours, run_hlo(tuple_form, seed)[1])



@pytest.mark.parametrize("shape,literal", [
    ("f32[64,64]", "-2.5"), ("pred[40,40]", "true"), ("bf16[32,32]", "0"),
    ("s8[4096,4096]", "7"),
])
def test_large_scalar_for_array_constants_stay_compact(shape, literal):
    """bfloat16_propagation_test.cc:1287 has two ``f32[4096,4096] constant(0)``: hloref
    took 52 s to parse them (a token per element) and printed 151 MB. A large array
    that is zero after its first element prints as that element alone; XLA reads the
    print back to the same value (its CPU run returns it)."""
    import time
    text = f"HloModule m\nENTRY e {{\n  ROOT c = {shape} constant({literal})\n}}\n"
    t0 = time.perf_counter()
    ours = parse_module(text)
    assert time.perf_counter() - t0 < 5
    printed = module_to_text(ours)
    assert f"constant({literal})" in printed and len(printed) < 200
    assert parse_module(printed) == ours
    from hloref.fuzz.oracles.xla import available, run_hlo
    if available():
        np.testing.assert_array_equal(run_hlo(printed), ours.entry.root.literal)


def test_complex_array_needs_nested_literal():
    text = "HloModule m\nENTRY e {\n  ROOT c = c64[4] constant((1, 2))\n}\n"
    with pytest.raises(Exception, match="expects nested array in rank 1, but sees 0"):
        xc.hlo.hlo_module_from_text(text)
    with pytest.raises(HloParseError, match="expects nested array in rank 1, but sees 0"):
        parse_module(text)
