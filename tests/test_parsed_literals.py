"""The constants of XLA's parsed module read from its HloModuleProto
(fuzz/parsed_literals.py), checked against TensorFlow's own protobuf classes for
the proto (``hlo_pb2``) and against the values the text writes."""

from __future__ import annotations

import numpy as np
import pytest

import hloref
from hloref.fuzz.parsed_literals import constant_differences, parsed_constants

pytest.importorskip("jax")
xc = pytest.importorskip("jaxlib.xla_client")

# one constant of each element type the reader takes, with ordinary values (XLA's parser
# and hloref's agree on them), and a constant with a non-default layout
TYPES = ["pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32",
         "f64", "c64", "c128", "f8e5m2", "f8e4m3fn", "f8e4m3b11fnuz", "f8e5m2fnuz",
         "f8e4m3fnuz", "f8e4m3", "f8e3m4", "f8e8m0fnu", "f4e2m1fn", "s4", "u4", "s2", "u2"]
VALUES = {"pred": "{true, false, true}", "c64": "{(1, -2), (0.5, 3), (-4, 0)}",
          "c128": "{(1, -2), (0.5, 3), (-4, 0)}", "f8e8m0fnu": "{1, 0.5, 4}",
          "s2": "{-2, 1, 0}", "u2": "{3, 1, 0}", "f4e2m1fn": "{-1, 6, 0.5}",
          "f8e4m3b11fnuz": "{-1, 0.5, 2}", "f8e5m2fnuz": "{-1, 0.5, 2}",
          "f8e4m3fnuz": "{-1, 0.5, 2}"}
UNSIGNED = {"u8", "u16", "u32", "u64", "u4", "u2"}


def _module(extra: str = "") -> str:
    lines, names = [], []
    for i, t in enumerate(TYPES):
        value = VALUES.get(t, "{1, 7, 0}" if t in UNSIGNED else "{-1, 7, 0}")
        lines.append(f"  c{i} = {t}[3] constant({value})")
        names.append((f"c{i}", f"{t}[3]"))
    lines.append("  m = f32[2,3]{0,1} constant({{1, 2, 3}, {4, 5, 6}})")
    names.append(("m", "f32[2,3]{0,1}"))
    lines.append(extra)
    shapes = ", ".join(s for _, s in names)
    return ("HloModule m\nENTRY e {\n" + "\n".join(lines) + "\n  ROOT t = (" + shapes +
            ") tuple(" + ", ".join(n for n, _ in names) + ")\n}\n")


def _proto(text: str) -> bytes:
    return xc.hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto()


def test_reader_agrees_with_protobufs_own_classes():
    hlo_pb2 = pytest.importorskip("tensorflow.compiler.xla.service.hlo_pb2")
    proto = _proto(_module())
    ours = parsed_constants(proto)
    message = hlo_pb2.HloModuleProto.FromString(proto)
    theirs = {(c.name, i.name): i for c in message.computations for i in c.instructions
              if i.opcode == "constant"}
    assert set(ours) == set(theirs)
    for key, instr in theirs.items():
        assert list(ours[key].shape) == list(instr.shape.dimensions), key
    # the fields read as protobuf reads them, for the wide types
    by_name = {name: v for (_, name), v in ours.items()}
    for i, t in enumerate(TYPES):
        lit = theirs[("e", f"c{i}")].literal
        field = {"s32": lit.s32s, "s64": lit.s64s, "u32": lit.u32s, "u64": lit.u64s,
                 "f32": lit.f32s, "f64": lit.f64s, "pred": lit.preds}.get(t)
        if field is not None:
            assert list(by_name[f"c{i}"]) == list(field), t
    # complex literals: protobuf's repeated (real, imaginary) doubles and floats, as read
    for t, field in (("c128", "c128s"), ("c64", "c64s")):
        name = f"c{TYPES.index(t)}"
        pairs = list(getattr(theirs[("e", name)].literal, field))
        ours_parts = np.stack([by_name[name].real, by_name[name].imag], -1).reshape(-1)
        assert ours_parts.tolist() == pairs == [1, -2, 0.5, 3, -4, 0], t


def test_ordinary_constants_of_every_type_equal_the_text():
    text = _module()
    proto = _proto(text)
    assert constant_differences(hloref.parse(text), proto) == []
    values = {name: v for (_, name), v in parsed_constants(proto).items()}
    assert len(values) == len(TYPES) + 1
    # the {0,1} layout is undone: row-major values as the text writes them
    assert values["m"].tolist() == [[1, 2, 3], [4, 5, 6]]
    assert values[f"c{TYPES.index('s4')}"].astype(int).tolist() == [-1, 7, 0]
    assert values[f"c{TYPES.index('f4e2m1fn')}"].astype(float).tolist() == [-1, 6, 0.5]


def test_a_changed_constant_is_named_with_both_values():
    # the proto of one text against hloref's reading of another: one element differs
    written = "HloModule m\nENTRY e {\n  ROOT c = f32[3] constant({1, 2.5, 3})\n}\n"
    other = "HloModule m\nENTRY e {\n  ROOT c = f32[3] constant({1, 2, 3})\n}\n"
    (d,) = constant_differences(hloref.parse(written), _proto(other))
    assert (d.computation, d.instruction, d.kind) == ("e", "c", "float: finite -> finite")
    assert d.text.startswith("%c (e): ") and "first difference at [1]: 2.5 became 2.0" in d.text


def test_a_zeros_sign_in_a_complex_part_counts():
    written = "HloModule m\nENTRY e {\n  ROOT c = c64[2] constant({(1, -0.0), (4, 2)})\n}\n"
    other = "HloModule m\nENTRY e {\n  ROOT c = c64[2] constant({(1, 0.0), (4, 2)})\n}\n"
    (d,) = constant_differences(hloref.parse(written), _proto(other))
    assert "first difference at [0]" in d.text
    assert d.kind == "complex: (finite, -0) -> (finite, +0)"
    assert constant_differences(hloref.parse(written), _proto(written)) == []
