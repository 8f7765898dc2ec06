"""Buffer sizes, buffers and live ranges (``hloref.memory_sizes``, ``hloref.liveness``)
against values derived by hand from the written semantics (ShapeUtil::ByteSizeOf,
HloAliasAnalysis and HloLiveRange as documented in those modules)."""

from __future__ import annotations

import numpy as np
import pytest

import hloref
from hloref.buffer_assignment import parse_buffer_assignment
from hloref.errors import HloParseError
from hloref.liveness import analyze
from hloref.memory_sizes import buffer_bytes, memory_space


def _shape(text: str):
    module = hloref.parse(f"HloModule m\nENTRY e {{\n  ROOT p = {text} parameter(0)\n}}\n")
    return module.entry.root.shape


@pytest.mark.parametrize("text,size", [
    ("f32[2,3]{1,0}", 24),
    ("f32[2,3]{0,1}", 24),
    ("s4[5]{0}", 5),                       # unpacked: one byte per element
    ("s4[5]{0:E(4)}", 3),                  # packed: ceil(5 * 4 / 8)
    ("u2[9]{0:E(2)}", 3),                  # ceil(9 * 2 / 8)
    ("pred[3]{0}", 3),
    ("bf16[7]{0}", 14),
    ("c64[2]{0}", 16),
    ("f32[3,5]{1,0:T(8,128)}", 8 * 128 * 4),  # tiles pad the two minor dimensions
    ("f32[<=4]{0}", 16 + 4),               # bounded dynamic: one s32 of size metadata
    ("(f32[2]{0}, s32[], (f32[1]{0}))", 3 * 8),  # the index table only
    ("token[]", 0),
])
def test_buffer_bytes(text, size):
    assert buffer_bytes(_shape(text)) == size


def test_memory_space():
    assert memory_space(_shape("f32[4]{0:S(5)}")) == 5
    assert memory_space(_shape("f32[4]{0}")) == 0


STRAIGHT = """HloModule m, is_scheduled=true
ENTRY e {
  p0 = f32[4]{0} parameter(0)
  a = f32[4]{0} add(p0, p0)
  b = f32[8]{0} concatenate(a, a), dimensions={0}
  c = f32[4]{0} multiply(a, a)
  d = f32[4]{0} slice(b), slice={[0:4]}
  ROOT r = f32[4]{0} add(c, d)
}
"""


def test_peak_of_a_straight_line_by_hand():
    # times p0 0, a 1, b 2, c 3, d 4, r 5; live ranges (inclusive): p0 0-5 (argument),
    # a 1-3, b 2-4, c 3-5, d 4-5, r 5-5 (output); bytes 16, 16, 32, 16, 16, 16:
    # t0 16, t1 32, t2 64, t3 80, t4 80, t5 64
    lv = analyze(hloref.parse(STRAIGHT))
    assert lv.timeline == ["p0", "a", "b", "c", "d", "r"]
    assert lv.live[0] == [16, 32, 64, 80, 80, 64]
    assert lv.peak() == (80, 3)
    assert lv.peak_instruction() == "c"
    spans = {b.name: (b.start, b.end) for b in lv.buffers}
    assert spans == {"p0": (0, 5), "a": (1, 3), "b": (2, 4), "c": (3, 5), "d": (4, 5),
                     "r": (5, 5)}
    figures = lv.figures()
    assert (figures["argument"], figures["output"], figures["temp"]) == (16, 16, 64)


WHILE = """HloModule m, is_scheduled=true
cond {
  cp = (s32[], f32[4]{0}) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(ci, n), direction=LT
}
body {
  bp = (s32[], f32[4]{0}) parameter(0)
  bi = s32[] get-tuple-element(bp), index=0
  bx = f32[4]{0} get-tuple-element(bp), index=1
  one = s32[] constant(1)
  ni = s32[] add(bi, one)
  nx = f32[4]{0} multiply(bx, bx)
  ROOT bt = (s32[], f32[4]{0}) tuple(ni, nx)
}
ENTRY e {
  p = f32[4]{0} parameter(0)
  z = s32[] constant(0)
  init = (s32[], f32[4]{0}) tuple(z, p)
  w = (s32[], f32[4]{0}) while(init), condition=cond, body=body
  x = f32[4]{0} get-tuple-element(w), index=1
  u = f32[2]{0} parameter(1)
  i = s32[] constant(1)
  ROOT y = f32[4]{0} dynamic-update-slice(x, u, i)
}
"""


def test_while_state_and_in_place_update_share_buffers():
    lv = analyze(hloref.parse(WHILE))
    state = lv.buffer_at("w", (1,))
    # the init element (the parameter p), both computations' parameters, the body root
    # and the while's result hold the same bytes
    for position in [("p", ()), ("cp", (1,)), ("bp", (1,)), ("bx", ()), ("nx", ()),
                     ("bt", (1,)), ("x", ())]:
        assert lv.buffer_at(*position) is state, position
    # the dynamic-update-slice writes into its operand's buffer
    assert lv.buffer_at("y") is state
    # the loop counter and the tuple tables are other buffers
    assert lv.buffer_at("w", (0,)) is lv.buffer_at("ni") is lv.buffer_at("z")
    assert lv.buffer_at("w") is lv.buffer_at("init") is lv.buffer_at("bt")
    assert lv.buffer_at("w", (0,)) is not state
    # the timeline flattens cond, then body, before the while
    assert lv.timeline.index("lt") < lv.timeline.index("nx") < lv.timeline.index("w")
    # p is an argument and (through the while and the update) the output
    assert state.kind == "alias"


def test_donated_argument_joins_its_output():
    text = STRAIGHT.replace("is_scheduled=true",
                            "is_scheduled=true, input_output_alias={ {}: (0, {}, may-alias) }")
    lv = analyze(hloref.parse(text))
    assert lv.buffer_at("r") is lv.buffer_at("p0")
    assert lv.figures()["alias"] == 16


def test_host_memory_space_is_counted_apart():
    text = """HloModule m, is_scheduled=true
ENTRY e {
  p = f32[8]{0} parameter(0)
  h = f32[8]{0:S(5)} copy(p)
  q = f32[8]{0} copy(h)
  ROOT r = f32[8]{0} add(q, p)
}
"""
    lv = analyze(hloref.parse(text))
    assert lv.peak(5) == (32, 1)           # h, from its copy to its last use
    assert lv.peak(0)[0] == 32 + 32 + 32   # p, then q and r at r's time
    assert lv.buffer_at("h").space == 5


def test_buffer_assignment_text_and_bad_lines():
    text = """BufferAssignment:
allocation 0: size 16, parameter 0, shape |f32[4]| at ShapeIndex {}, maybe-live-out:
 value: <3 p0 @0> (size=16,offset=0): f32[4]{0}
allocation 1: size 48, preallocated-temp:
 value: <4 w{1} (phi) @0> (size=16,offset=32): f32[4]{0}
allocation 2: size 8, preallocated-temp:
 value: <5 h @5> (size=8,offset=0): f32[2]{0}

Total bytes used: 64
"""
    ba = parse_buffer_assignment(text)
    assert [a.size for a in ba.allocations] == [16, 48, 8]
    assert ba.allocations[0].parameter == 0 and ba.allocations[0].is_live_out
    value = ba.allocations[1].values[0]
    assert (value.instruction, value.index, value.is_phi, value.offset) == ("w", (1,), True, 32)
    assert ba.allocations[2].color == 5
    assert ba.figures() == {"argument": 16, "output": 16, "alias": 16, "temp": 48,
                            "constant": 0}
    assert ba.figures(host=True)["temp"] == 8
    with pytest.raises(HloParseError, match=r"<text>:3:1: not a buffer-assignment value line"):
        parse_buffer_assignment(text.replace("(size=16,offset=0)", "(size=16 offset=0)", 1))
    with pytest.raises(HloParseError, match="no 'BufferAssignment:'"):
        parse_buffer_assignment("allocation 0: size 4:\n")


def test_cli_compare_and_plot_by_hand(tmp_path, capsys):
    from hloref.cli import main
    before = tmp_path / "before.hlo"
    after = tmp_path / "after.hlo"
    before.write_text(STRAIGHT)
    # b grows from f32[8] to f32[12]: at c (t3) 16 + 16 + 48 + 16 = 96 bytes
    after.write_text(STRAIGHT.replace("b = f32[8]{0} concatenate(a, a)",
                                      "b = f32[12]{0} concatenate(a, a, a)"))
    code = main(["memory", str(before), "--compare", str(after), "--json",
                 str(tmp_path / "m.json"), "--plot", str(tmp_path / "m.png")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "peak 80 bytes at %c" in out
    assert "peak 80 -> 96 bytes (+16); at %c -> %c" in out
    import json
    report = json.loads((tmp_path / "m.json").read_text())
    assert report["compare"]["instructions"] == [
        {"instruction": "b", "before": 32, "after": 48, "delta": 16}]
    assert (tmp_path / "m.png").stat().st_size > 1000


IN_PLACE = """HloModule m, is_scheduled=true
cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT lt = pred[] compare(a, b), direction=LT
}
ENTRY e {
  p = f32[8]{0} parameter(0)
  n = f32[8]{0} negate(p)
  s = f32[8]{0} sort(n), dimensions={0}, to_apply=cmp
  r = f32[8]{0} reverse(s), dimensions={0}
  ROOT o = f32[8]{0} add(r, p)
}
"""


def _assignment(offsets: dict[str, int]) -> str:
    lines = ["BufferAssignment:",
             "allocation 0: size 32, parameter 0, shape |f32[8]| at ShapeIndex {}:",
             " value: <0 p @0> (size=32,offset=0): f32[8]{0}",
             "allocation 1: size 64, preallocated-temp:"]
    lines += [f" value: <{i + 1} {name} @0> (size=32,offset={off}): f32[8]{{0}}"
              for i, (name, off) in enumerate(offsets.items())]
    lines += ["allocation 2: size 32, output shape is |f32[8]|, maybe-live-out:",
              " value: <9 o @0> (size=32,offset=0): f32[8]{0}"]
    return "\n".join(lines) + "\n"


def test_in_place_reuse_is_legal_only_for_ops_that_compute_in_place():
    from hloref.assignment_check import check_assignment
    from hloref.memory_arena import evaluate_through_assignment
    module = hloref.parse(IN_PLACE)
    lv = analyze(module)
    # n (t1) is read last by the sort (t2), which may write its result over it; the sort's
    # result (t2-t3) is read last by the reverse (t3), which may not
    ok = parse_buffer_assignment(_assignment({"n": 0, "s": 0, "r": 32}))
    assert check_assignment(lv, ok).ok
    bad = parse_buffer_assignment(_assignment({"n": 0, "s": 32, "r": 32}))
    collisions = check_assignment(lv, bad).collisions
    assert [(c.rule, c.values) for c in collisions] == [("illegal-in-place", ("s", "r"))]
    assert "reverse %r writes r over s" in collisions[0].message
    # two values live at once in the same bytes: n (t1-t2) and a result defined at t2
    # that the sort does not write (a neighbour's slot) is an overlap
    clash = parse_buffer_assignment(_assignment({"n": 0, "s": 16, "r": 32}))
    rules = [(c.rule, c.values) for c in check_assignment(lv, clash).collisions]
    assert ("illegal-in-place", ("n", "s")) in rules
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    assert evaluate_through_assignment(module, ok, [x], lv=lv).ok


def test_packed_values_carried_beside_the_arena_through_a_tuple():
    from hloref.memory_arena import evaluate_through_assignment
    module = hloref.parse("""HloModule m, is_scheduled=true
ENTRY e {
  p = s8[6]{0} parameter(0)
  c = s4[6]{0:E(4)} convert(p)
  n = s4[6]{0:E(4)} negate(c)
  ROOT t = (s4[6]{0:E(4)}, s8[6]{0}) tuple(n, p)
}
""")
    assignment = parse_buffer_assignment("""BufferAssignment:
allocation 0: size 6, parameter 0, shape |s8[6]| at ShapeIndex {}, maybe-live-out:
 value: <0 p @0> (size=6,offset=0): s8[6]{0}
allocation 1: size 3, preallocated-temp:
 value: <1 c @0> (size=3,offset=0): s4[6]{0:E(4)}
allocation 2: size 3, maybe-live-out:
 value: <2 n @0> (size=3,offset=0): s4[6]{0:E(4)}
allocation 3: size 16, output shape is |(s4[6], s8[6])|, maybe-live-out:
 value: <3 t{} @0> (size=16,offset=0): (s4[6]{0:E(4)}, s8[6]{0})
""")
    lv = analyze(module)
    from hloref.assignment_check import check_assignment
    assert check_assignment(lv, assignment).ok  # 3 bytes hold six packed s4 values
    result = evaluate_through_assignment(module, assignment,
                                         [np.array([1, -2, 3, -4, 5, 7], np.int8)], lv=lv)
    assert result.ok and result.unplaced == 2


DUS_FUSION = """HloModule m, is_scheduled=true
fused {
  a = f32[8]{0} parameter(0)
  u = f32[2]{0} parameter(1)
  i = s32[] parameter(2)
  n = f32[8]{0} negate(a)
  ROOT d = f32[8]{0} dynamic-update-slice(n, u, i)
}
fused_bad {
  a = f32[8]{0} parameter(0)
  i = s32[] parameter(2)
  u = f32[2]{0} parameter(1)
  s = f32[2]{0} slice(a), slice={[6:8]}
  n = f32[8]{0} negate(a)
  ROOT d = f32[8]{0} dynamic-update-slice(n, s, i)
}
ENTRY e {
  p = f32[8]{0} parameter(0)
  q = f32[2]{0} parameter(1)
  j = s32[] parameter(2)
  x = f32[8]{0} exponential(p)
  f = f32[8]{0} fusion(x, q, j), kind=kLoop, calls=FUSED
  ROOT o = f32[8]{0} add(f, p)
}
"""


def _dus_assignment(same: bool) -> str:
    return "\n".join([
        "BufferAssignment:",
        "allocation 0: size 32, parameter 0, shape |f32[8]| at ShapeIndex {}:",
        " value: <0 p @0> (size=32,offset=0): f32[8]{0}",
        "allocation 1: size 8, parameter 1, shape |f32[2]| at ShapeIndex {}:",
        " value: <1 q @0> (size=8,offset=0): f32[2]{0}",
        "allocation 2: size 4, parameter 2, shape |s32[]| at ShapeIndex {}:",
        " value: <2 j @0> (size=4,offset=0): s32[]",
        "allocation 3: size 64, preallocated-temp:",
        " value: <3 x @0> (size=32,offset=0): f32[8]{0}",
        f" value: <4 f @0> (size=32,offset={0 if same else 32}): f32[8]{{0}}",
        "allocation 4: size 32, output shape is |f32[8]|, maybe-live-out:",
        " value: <5 o @0> (size=32,offset=0): f32[8]{0}"]) + "\n"


def test_fusion_updating_its_operand_with_dynamic_update_slice_computes_in_place():
    """A loop fusion whose parameter reaches a dynamic-update-slice's operand 0 through
    elementwise ops may write over it (each element stays or is replaced); one that
    also reads the parameter elsewhere (the update is a slice of it) may not."""
    from hloref.assignment_check import check_assignment
    from hloref.memory_arena import evaluate_through_assignment
    p = np.linspace(-1, 1, 8, dtype=np.float32)
    args = [p, np.array([5, 6], np.float32), np.int32(3)]
    module = hloref.parse(DUS_FUSION.replace("FUSED", "fused"))
    lv = analyze(module)
    assert check_assignment(lv, parse_buffer_assignment(_dus_assignment(True))).ok
    assert check_assignment(lv, parse_buffer_assignment(_dus_assignment(False))).ok
    result = evaluate_through_assignment(module, parse_buffer_assignment(_dus_assignment(True)),
                                         args, lv=lv)
    assert result.ok
    expected = -np.exp(p)
    expected[3:5] = [5, 6]
    np.testing.assert_allclose(hloref.evaluate(module, *args), expected + p, rtol=1e-6)
    bad = hloref.parse(DUS_FUSION.replace("FUSED", "fused_bad"))
    rules = [c.rule for c in check_assignment(analyze(bad), parse_buffer_assignment(
        _dus_assignment(True))).collisions]
    assert rules == ["illegal-in-place"], rules
