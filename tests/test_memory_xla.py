"""The memory audit against XLA:CPU's own figures and buffer assignments, and corrupted
assignments flagged with the colliding pair (``hloref.memory_audit``,
``hloref.assignment_check``, ``hloref.memory_arena``, ``hloref memory``)."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

pytest.importorskip("jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import hloref  # noqa: E402
import hloref.jax as hj  # noqa: E402
from hloref.assignment_check import check_assignment  # noqa: E402
from hloref.buffer_assignment import parse_buffer_assignment  # noqa: E402
from hloref.cli import main  # noqa: E402
from hloref.fuzz.memory_xla import compile_for_memory  # noqa: E402
from hloref.liveness import analyze  # noqa: E402
from hloref.memory_arena import evaluate_through_assignment  # noqa: E402


def _temps(x, w):
    a = jnp.sin(x)
    b = jnp.cos(x) @ w
    c = jnp.tanh(a @ w)
    return (a * b + c).sum(axis=0), c


def _scan(c, xs):
    def step(c, x):
        h = jnp.tanh(c @ x)
        g = jnp.sin(h) @ x
        return h + g, (h * g).sum()
    return jax.lax.scan(step, c, xs)


def _donated(x, y):
    return x * 2 + y, jnp.sin(x).sum()


X = np.linspace(-1, 1, 32 * 32, dtype=np.float32).reshape(32, 32)
W = np.linspace(2, -2, 32 * 32, dtype=np.float32).reshape(32, 32).T.copy()
#: big enough that XLA:CPU keeps sin(x) apart from its reduction (a temp while y lives)
X64 = np.linspace(-3, 3, 64 * 64, dtype=np.float32).reshape(64, 64)


class Compiled:
    def __init__(self, fn, *args):
        self.xla = compile_for_memory(fn.lower(*args).as_text())
        self.module = hloref.parse(self.xla.optimized)
        self.assignment = parse_buffer_assignment(self.xla.assignment)
        self.lv = analyze(self.module)
        self.args = [np.asarray(a) for a in args]


@pytest.fixture(scope="module")
def temps():
    return Compiled(jax.jit(_temps), X, W)


@pytest.fixture(scope="module")
def donated():
    return Compiled(jax.jit(_donated, donate_argnums=(1,)), X64, X64 + 1)


@pytest.fixture(scope="module")
def scan():
    xs = np.stack([W * (0.5 + 0.1 * k) for k in range(4)])
    return Compiled(jax.jit(_scan), X, xs)


def _value_of(c: Compiled, value):
    return c.lv.values[c.lv.position_value[(value.instruction, value.index)]]


def _single(c: Compiled):
    """XLA values that are the only one placed for their buffer."""
    count: dict[int, int] = {}
    for _, v in c.assignment.values():
        key = (v.instruction, v.index)
        if key in c.lv.position_value:
            b = c.lv.values[c.lv.position_value[key]].buffer
            count[b] = count.get(b, 0) + 1
    return lambda v: (v.instruction, v.index) in c.lv.position_value and \
        count.get(_value_of(c, v).buffer) == 1


def test_original_assignments_pass(temps, donated, scan):
    for c in (temps, donated, scan):
        check = check_assignment(c.lv, c.assignment)
        assert check.ok, check.collisions
        assert check.checked_values > 3 and not check.unmodelled
        arena = evaluate_through_assignment(c.module, c.assignment, c.args, lv=c.lv)
        assert arena.ok and not arena.clobbers and arena.compared > 3


def test_move_offset_onto_a_live_neighbour(temps):
    c = temps
    single = _single(c)
    chosen = None
    for alloc in c.assignment.allocations:
        if not alloc.is_temp:
            continue
        vals = [v for v in alloc.values if single(v)]
        for a in vals:
            for b in vals:
                va, vb = _value_of(c, a), _value_of(c, b)
                if (a is not b and va.start < vb.start < va.end and b.size <= a.size
                        and (a.offset + a.size <= b.offset or b.offset + b.size <= a.offset)):
                    chosen = chosen or (alloc.index, a, b)
    assert chosen is not None, "no two values live at once in the temp allocation"
    index, victim, writer = chosen
    bad = copy.deepcopy(c.assignment)
    moved = next(v for v in bad.allocations[index].values if v.id == writer.id)
    moved.offset = victim.offset
    check = check_assignment(c.lv, bad)
    assert [(x.rule, set(x.values)) for x in check.collisions] == \
        [("live-overlap", {victim.name, writer.name})]
    arena = evaluate_through_assignment(c.module, bad, c.args, lv=c.lv)
    assert not arena.ok
    assert arena.collided == (victim.name, writer.name)
    readers = [i.name for i in c.module.entry.instructions
               if any(o.name == victim.instruction for o in i.operands)]
    assert arena.first_changed in readers + [victim.instruction]


def test_move_offset_onto_a_live_neighbour_inside_a_loop(scan):
    """Two values of the loop body, live at once, moved onto the same bytes: the body
    runs through the arena on every iteration and the answer changes."""
    c = scan
    entry = {i.name for i in c.module.entry.instructions}
    single = _single(c)
    chosen = None
    for alloc in c.assignment.allocations:
        vals = [v for v in alloc.values if single(v) and v.instruction not in entry]
        for a in vals:
            for b in vals:
                va, vb = _value_of(c, a), _value_of(c, b)
                if (a is not b and va.start < vb.start < va.end and b.size <= a.size
                        and (a.offset + a.size <= b.offset or b.offset + b.size <= a.offset)):
                    chosen = chosen or (alloc.index, a, b)
    assert chosen is not None, "no two body values live at once in one allocation"
    index, victim, writer = chosen
    bad = copy.deepcopy(c.assignment)
    next(v for v in bad.allocations[index].values if v.id == writer.id).offset = victim.offset
    check = check_assignment(c.lv, bad)
    assert ("live-overlap", {victim.name, writer.name}) in \
        [(x.rule, set(x.values)) for x in check.collisions]
    arena = evaluate_through_assignment(c.module, bad, c.args, lv=c.lv)
    assert not arena.ok and arena.collided == (victim.name, writer.name)
    assert evaluate_through_assignment(c.module, c.assignment, c.args, lv=c.lv).ok


def test_shrink_a_slice(temps):
    c = temps
    bad = copy.deepcopy(c.assignment)
    alloc = next(a for a in bad.allocations if a.is_temp)
    value = max(alloc.values, key=lambda v: v.size)
    value.size -= 4
    check = check_assignment(c.lv, bad)
    assert [(x.rule, x.values) for x in check.collisions if x.rule == "too-small"] == \
        [("too-small", (value.name,))]
    assert f"needs {value.size + 4} bytes" in str(check.collisions[0])


def test_donated_argument_reused_too_early(donated):
    c = donated
    param_alloc = next(a for a in c.assignment.allocations if a.is_parameter and a.is_live_out)
    param = param_alloc.values[0]
    p_value = _value_of(c, param)
    temp_alloc = next(a for a in c.assignment.allocations if a.is_temp)
    early = next(v for v in temp_alloc.values
                 if _value_of(c, v).start < p_value.end and v.size <= param_alloc.size)
    bad = copy.deepcopy(c.assignment)
    source = next(a for a in bad.allocations if a.index == temp_alloc.index)
    target = next(a for a in bad.allocations if a.index == param_alloc.index)
    moved = next(v for v in source.values if v.id == early.id)
    source.values.remove(moved)
    moved.offset = 0
    target.values.append(moved)
    check = check_assignment(c.lv, bad)
    assert [(x.rule, set(x.values)) for x in check.collisions] == \
        [("live-overlap", {param.name, early.name})]
    arena = evaluate_through_assignment(c.module, bad, c.args, lv=c.lv)
    assert arena.collided == (param.name, early.name)
    assert arena.first_changed is not None


def test_figures_of_donation_against_memory_analysis():
    audit = hj.memory(jax.jit(_donated, donate_argnums=(1,)), X64, X64 + 1)
    rows = {r.figure: r for r in audit.rows}
    assert rows["alias"].xla == rows["alias"].hloref == 64 * 64 * 4
    # outputs: the donated buffer, the result tuple's index table (2 pointers), one f32
    assert rows["output"].xla == rows["output"].hloref == 16384 + 16 + 4
    assert rows["argument"].xla == rows["argument"].hloref == 2 * 16384
    # the peak is where the reduction reads the temporary sin(x): both arguments (the
    # donated one holds x * 2 + y by then), sin(x) and the f32 sum; the index table of
    # the result tuple comes after sin(x) dies
    assert audit.peak == 2 * 16384 + 16384 + 4
    assert audit.ok, audit.findings


# the realistic programs' subset with a loop, an fp8 matmul and attention
REALISTIC = ("layer_norm", "fp8_matmul", "attention_fwd", "rk4_lorenz", "beam_search")


@pytest.mark.parametrize("name", REALISTIC)
def test_realistic_programs_against_memory_analysis(name):
    import realistic_programs as rp
    program = rp.PROGRAMS[name]()
    audit = hj.memory(program.jitted(), *program.args)
    assert audit.ok, audit.findings
    rows = {r.figure: r for r in audit.rows}
    for figure in ("argument", "output", "alias", "constant"):
        assert rows[figure].hloref == rows[figure].xla, figure
    assert rows["peak"].unexplained == 0
    assert audit.arena is not None and audit.arena.ok


def test_cli_reads_a_dump_directory(tmp_path, temps, capsys):
    dump = tmp_path / "dump"
    dump.mkdir()
    stem = dump / "module_0000.jit__temps.cpu_after_optimizations"
    (dump / f"{stem.name}.txt").write_text(temps.xla.optimized)
    (dump / f"{stem.name}-buffer-assignment.txt").write_text(temps.xla.assignment)
    assert main(["memory", str(dump), "--json", str(tmp_path / "a.json")]) == 0
    report = json.loads((tmp_path / "a.json").read_text())
    assert report["peak"] == temps.lv.peak()[0] and not report["findings"]
    assert report["evaluation"]["ok"]
    # a corrupted copy: the first temp value moved onto the second's offset
    lines = temps.xla.assignment.splitlines()
    start = next(i for i, ln in enumerate(lines) if "preallocated-temp" in ln)
    offsets = [ln for ln in lines[start + 1:] if ln.startswith(" value:")]
    bad_text = temps.xla.assignment
    for a in offsets:
        for b in offsets:
            if a is not b and "offset=0)" in a and "offset=0)" not in b:
                bad_text = temps.xla.assignment.replace(
                    b, b.replace(b[b.index("offset="):b.index(")", b.index("offset="))],
                                 "offset=0"))
                break
        if bad_text != temps.xla.assignment:
            break
    (dump / f"{stem.name}-buffer-assignment.txt").write_text(bad_text)
    capsys.readouterr()
    assert main(["memory", str(dump)]) == 1
    out = capsys.readouterr().out
    assert "FINDING assignment live-overlap" in out
    # bad input: no file, a module that is not scheduled, a broken assignment
    assert main(["memory", str(tmp_path / "missing.hlo")]) == 2
    plain = tmp_path / "plain.hlo"
    plain.write_text("HloModule m\nENTRY e {\n  ROOT p = f32[2] parameter(0)\n}\n")
    assert main(["memory", str(plain)]) == 2
    (dump / f"{stem.name}-buffer-assignment.txt").write_text(
        "BufferAssignment:\nallocation 0: size 4:\n value: <1 x>\n")
    assert main(["memory", str(dump)]) == 2
    err = capsys.readouterr().err
    assert "not a buffer-assignment value line" in err


def test_hlo_text_audited_and_refusals_survived():
    from pathlib import Path

    from hloref.fuzz.memory_xla import XlaMemoryError, audit_hlo_text
    text = (Path(__file__).resolve().parents[1] / "examples" / "mlp.hlo").read_text()
    module = hloref.parse(text)
    from hloref.cli_common import random_arguments
    audit = audit_hlo_text(text, random_arguments(module, 0))
    assert audit.ok, audit.findings
    assert audit.arena is not None and audit.arena.ok
    rows = {r.figure: r for r in audit.rows}
    params = sum(4 * int(np.prod(p.shape.dims)) for p in module.entry.parameters)
    assert rows["argument"].xla == rows["argument"].hloref == params
    # a module XLA refuses comes back as an error, and this process lives on
    bad = "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT r = f32[3] add(p, p)\n}\n"
    with pytest.raises(XlaMemoryError):
        audit_hlo_text(bad)


def test_write_into_a_read_only_argument(donated):
    """A temporary moved into the allocation of entry parameter 0 (not donated: the
    caller's bytes) is flagged ``read-only`` with the pair, even where its live range
    would allow the reuse; the donated parameter's allocation is not read-only."""
    c = donated
    bad = copy.deepcopy(c.assignment)
    temp = next(a for a in bad.allocations if a.is_temp)
    value = max(temp.values, key=lambda v: v.size)
    param = next(a for a in bad.allocations if a.parameter == 0)
    assert not param.is_live_out and value.size <= param.size
    temp.values.remove(value)
    value.offset = 0
    param.values.append(value)
    rules = [(x.rule, x.values) for x in check_assignment(c.lv, bad).collisions]
    assert ("read-only", (param.values[0].name, value.name)) in rules, rules
    donated_alloc = next(a for a in c.assignment.allocations if a.parameter == 1)
    assert donated_alloc.is_live_out  # aliased with an output: writable, and not flagged
    assert check_assignment(c.lv, c.assignment).ok


def test_xla_cpu_peak_is_compute_peak_memory_without_heap_traces(temps, donated, scan):
    """Why XLA:CPU's peak_memory_in_bytes leaves out temporaries: it is XLA's
    ComputePeakMemory on the executable's BufferAssignmentProto (replayed here,
    fuzz/memory_proto.py, and equal to XLA's figure), and that proto carries no
    heap-simulator traces, where the temporaries would be; so the peak is the
    parameter, constant and live-out allocations' largest buffers alone."""
    for c in (temps, donated, scan):
        s = c.xla.stats
        assert s["heap_simulator_traces"] == 0
        assert s["recounted_peak_in_bytes"] == s["peak_memory_in_bytes"]
        figs = c.assignment.figures()
        assert s["temp_size_in_bytes"] > 0
        assert s["peak_memory_in_bytes"] == (figs["argument"] + figs["output"]
                                             + figs["constant"] - figs["alias"])
    rows = {r.figure: r for r in hj.memory(jax.jit(_temps), X, W).rows}
    assert dict(rows["peak"].causes).get("XLA:CPU's peak leaves out temporaries", 0) < 0
    assert not rows["peak"].finding
