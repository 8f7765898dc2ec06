"""The ``undetermined`` verdict (fuzz/undetermined.py, the reducer records of
fuzz/known_gaps.py): where the module and inputs determine no single value, ``diff``
names the cause and the elements concerned, checks what the text still determines, and
is no mismatch; campaigns skip such programs; ``hloref diff`` exits 0. Checked against
XLA:CPU, and by hand with oracle values that break what the text determines."""

from __future__ import annotations

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from hloref.fuzz.differential import diff

from hlo_modules import MODULES

SORT = """HloModule m

cmp {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  c = f32[] parameter(2)
  d = f32[] parameter(3)
  ROOT lt = pred[] compare(a, b), direction=LT
}

ENTRY e {
  k = s32[65] parameter(0)
  v = f32[65] parameter(1)
  ROOT s = (s32[65], f32[65]) sort(k, v), dimensions={0}, is_stable=false, to_apply=cmp
}
"""

#: keys 0 (32 of them), one 1, then 2 (32): the 1 is tied to no neighbour
KEYS = np.array([0, 2] * 32 + [1], np.int32)
VALUES = np.arange(65, dtype=np.float32)

REDUCE = """HloModule m

sub {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] subtract(a, b)
}

ENTRY e {
  x = f32[1000] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(x, z), dimensions={0}, to_apply=sub
}
"""


@pytest.fixture(scope="module")
def worker():
    pytest.importorskip("jax")
    from hloref.fuzz.workers import OracleWorker
    with OracleWorker("xla") as w:
        yield w


def _sorted_by_hand():
    """hloref's answer of SORT, derived by hand: keys ascending, the tied values in
    their input order (any order is right for them)."""
    order = np.argsort(KEYS, kind="stable")
    return KEYS[order], VALUES[order]


def test_tied_keys_of_an_unstable_sort_are_undetermined_on_xla_cpu(worker):
    """XLA:CPU's std::sort scrambles the values of the 64 tied keys: the text leaves
    their order open, so the verdict is undetermined, naming the sort, and what the text
    does fix (each row's multiset, the untied element) was checked."""
    report = diff(SORT, [KEYS, VALUES], worker=worker)
    keys, values = report.actual
    assert np.array_equal(keys, _sorted_by_hand()[0])
    assert not np.array_equal(values, _sorted_by_hand()[1])  # XLA's order differs
    assert report.verdict == "undetermined", report.summary()
    assert report.undetermined == "unstable-sort-ties"
    assert "%s" in report.message
    assert "checked: 1 slice(s) of 65: a permutation of the input rows, in order" \
        in report.message


@pytest.mark.parametrize("break_", ["untied value", "not a permutation"])
def test_what_an_unstable_sort_still_determines_is_checked(break_):
    """By hand: an oracle value that moves the untied element's value, or that is no
    permutation of the row, is a mismatch, ties or not."""
    keys, values = _sorted_by_hand()
    values = values.copy()
    values[:32], values[33:] = values[:32][::-1], values[33:][::-1]  # ties reordered: allowed
    tied_ok = diff(SORT, [KEYS, VALUES], oracle_value=(keys, values), localize=False)
    assert tied_ok.verdict == "undetermined", tied_ok.summary()
    untied = int(np.flatnonzero(keys == 1)[0])
    if break_ == "untied value":
        j = untied - 1
        values[[j, untied]] = values[[untied, j]]
    else:
        values[0] = 1000.0
    report = diff(SORT, [KEYS, VALUES], oracle_value=(keys, values), localize=False)
    assert report.verdict == "mismatch", report.summary()
    assert report.undetermined is None


def test_a_non_associative_reducer_is_undetermined_on_xla_cpu(worker):
    x = np.linspace(-3, 5, 1000).astype(np.float32)
    report = diff(REDUCE, [x], worker=worker)
    # left to right, x0 - x1 - ... - x999 (by hand, in f64): XLA:CPU's answer is another
    left = -float(np.sum(x.astype(np.float64)))
    assert abs(float(report.actual) - left) > 1.0 or abs(float(report.expected) - left) > 1.0
    assert report.verdict == "undetermined", report.summary()
    assert report.undetermined == "non-associative-reducer" and "%r" in report.message


#: a mutant's reducer (a campaign's finding): each step of the sum rounded to f8e4m3fn
NARROWING = """HloModule m

r {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ca = f8e4m3fn[] convert(a)
  cb = f8e4m3fn[] convert(b)
  s = f8e4m3fn[] add(ca, cb)
  ROOT w = f32[] convert(s)
}

ENTRY e {
  x = f32[32,100] parameter(0)
  i = f32[] parameter(1)
  ROOT s = f32[32] reduce(x, i), dimensions={1}, to_apply=r
}
"""


#: a mutant's reducer (a campaign's finding): a ReLU on the accumulator, then add
RELU_ACC = """HloModule m

r {
  a = f32[] parameter(0)
  z = f32[] constant(-0)
  m = f32[] maximum(a, z)
  b = f32[] parameter(1)
  ROOT s = f32[] add(m, b)
}

ENTRY e {
  x = f32[12,200] parameter(0)
  i = f32[] parameter(1)
  ROOT s = f32[12] reduce(x, i), dimensions={1}, to_apply=r
}
"""


def _f8_add(a, b):
    f8 = ml_dtypes.float8_e4m3fn
    return float(f8(float(f8(a)) + float(f8(b))))


def _relu_add(a, b):
    return max(a, 0.0) + b


@pytest.mark.parametrize("module,r,shape", [(NARROWING, _f8_add, (32, 100)),
                                            (RELU_ACC, _relu_add, (12, 200))],
                         ids=["rounds-to-f8e4m3fn", "relu-of-the-accumulator"])
def test_a_reducer_that_is_not_associative_is_undetermined_on_xla_cpu(worker, module, r,
                                                                        shape):
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    if r is _f8_add:
        x = np.exp(-np.abs(x)).astype(np.float32)
    report = diff(module, [x, np.float32(0)], worker=worker)

    # by hand: the reduction of a row from the left and in pairs (a tree) differ
    def left(row):
        acc = 0.0
        for v in row:
            acc = r(acc, float(v))
        return acc

    def tree(row):
        vals = [r(0.0, float(v)) for v in row]
        while len(vals) > 1:
            vals = [r(vals[k], vals[k + 1]) if k + 1 < len(vals) else vals[k]
                    for k in range(0, len(vals), 2)]
        return vals[0]
    assert any(abs(left(row) - tree(row)) > 1e-3 for row in x)
    assert report.verdict == "undetermined", report.summary()
    assert report.undetermined == "non-associative-reducer" and "%s" in report.message


RNG = """HloModule m

ENTRY e {
  st = u64[2] parameter(0)
  ROOT g = (u64[2], u32[4]) rng-bit-generator(st), algorithm=rng_default
}
"""


def test_rng_default_is_undetermined_and_shapes_are_checked():
    """By hand: any u32[4] is a right answer of rng_default (a backend's algorithm)."""
    state = np.array([1, 2], np.uint64)
    other = (np.array([7, 8], np.uint64), np.array([1, 2, 3, 4], np.uint32))
    report = diff(RNG, [state], oracle_value=other, localize=False)
    assert report.verdict == "undetermined", report.summary()
    assert report.undetermined == "rng-state-unfixed"
    assert "%g" in report.message and "shapes and types agree" in report.message


ELIDED = """HloModule m

ENTRY e {
  c = f32[3] constant({...})
  ROOT r = f32[3] add(c, c)
}
"""

LOOP = MODULES["endless-while"]


def test_an_elided_constant_is_undetermined():
    report = diff(ELIDED, [], localize=False, oracle_value=np.zeros(3, np.float32))
    assert report.verdict == "undetermined" and report.undetermined == "elided-constant"
    assert "%c" in report.message


def test_a_loop_that_never_ends_is_undetermined():
    from hloref.evaluator.interpreter import Limits
    report = diff(LOOP, [], localize=False, oracle_value=np.int32(0),
                  limits=Limits(max_while_iterations=50))
    assert report.verdict == "undetermined" and report.undetermined == "loop-never-ends"
    assert "50 iterations" in report.message


def test_hloref_diff_exits_0_and_prints_the_verdict(tmp_path):
    path = tmp_path / "elided.hlo"
    path.write_text(ELIDED)
    run = subprocess.run([sys.executable, "-m", "hloref", "diff", str(path)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "verdict: undetermined" in run.stdout and "elided-constant" in run.stdout


def test_campaigns_skip_an_undetermined_program(worker):
    from hloref.fuzz.property import check_program
    outcome = check_program(SORT, [KEYS, VALUES], worker)
    assert outcome.kind == "known" and outcome.known == "unstable-sort-ties"


DYNAMIC = """HloModule m

ENTRY e {
  p = s32[4,3] parameter(0)
  n = s32[] parameter(1)
  ROOT s = s32[<=4,3] set-dimension-size(p, n), dimensions={0}
}
"""

ROWS = np.arange(12, dtype=np.int32).reshape(4, 3)


def test_the_padding_of_a_dynamic_result_is_undetermined_on_xla_cpu(worker):
    """Two of four rows at runtime: XLA:CPU returns the 4 x 3 buffer, the 2 x 3 value
    first, then padding (the text defines no value there); the first rows are checked."""
    report = diff(DYNAMIC, [ROWS, np.int32(2)], worker=worker)
    assert np.shape(report.actual) == (4, 3) and np.shape(report.expected) == (2, 3)
    assert np.array_equal(report.actual[:2], ROWS[:2])
    assert report.verdict == "undetermined", report.summary()
    assert report.undetermined == "dynamic-padding"
    assert "bound-sized buffer (4x3)" in report.message and "(2x3)" in report.message


@pytest.mark.parametrize("padding", [[-7, 0, 99, 1, 2, 3], [6, 7, 8, 9, 10, 11]])
def test_what_a_dynamic_result_still_determines_is_checked(padding):
    """By hand: any padding goes; a wrong element of the runtime-sized region, or a buffer
    that is not the bound, is a mismatch."""
    at_bound = np.concatenate([ROWS[:2].reshape(-1), padding]).astype(np.int32).reshape(4, 3)
    report = diff(DYNAMIC, [ROWS, np.int32(2)], oracle_value=at_bound, localize=False)
    assert report.verdict == "undetermined" and report.undetermined == "dynamic-padding"
    wrong = at_bound.copy()
    wrong[1, 2] += 1
    report = diff(DYNAMIC, [ROWS, np.int32(2)], oracle_value=wrong, localize=False)
    assert report.verdict == "mismatch" and report.undetermined is None
    report = diff(DYNAMIC, [ROWS, np.int32(2)], oracle_value=at_bound[:3], localize=False)
    assert report.verdict == "mismatch" and report.undetermined is None


#: a campaign's finding (a cumulative logsumexp of jax's): a written logaddexp reducer,
#: whose identity is -inf, started from 0
LOGADDEXP_WINDOW = """HloModule m

r {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  d = f32[] subtract(a, b)
  nan = pred[] compare(d, d), direction=NE
  s = f32[] add(a, b)
  m = f32[] maximum(a, b)
  n = f32[] abs(d)
  e = f32[] negate(n)
  x = f32[] exponential(e)
  l = f32[] log-plus-one(x)
  t = f32[] add(m, l)
  ROOT o = f32[] select(nan, s, t)
}

ENTRY e {
  p = f32[16,64] parameter(0)
  i = f32[] parameter(1)
  ROOT w = f32[16,64] reduce-window(p, i), window={size=1x64 pad=0_0x63_0}, to_apply=r
}
"""


def test_a_written_reducer_started_from_a_value_that_is_not_its_identity(worker):
    """logaddexp(0, x) = log(1 + e^x) is not x, so an init of 0 makes the value depend on
    where XLA puts it in the schedule: undetermined; -inf is the identity
    (logaddexp(-inf, x) = x + log1p(0)), and then XLA:CPU must match."""
    p = np.random.default_rng(5).standard_normal((16, 64)).astype(np.float32)
    # by hand, in f64: the first window holds p[:, 0] alone (63 elements of padding)
    first = np.log1p(np.exp(p[:, 0].astype(np.float64)))  # init 0 applied once
    assert np.all(np.abs(first - p[:, 0]) > 1e-3)
    zero = diff(LOGADDEXP_WINDOW, [p, np.float32(0)], worker=worker)
    assert zero.verdict == "undetermined", zero.summary()
    assert zero.undetermined == "reduce-non-identity-init" and "%w" in zero.message
    minus_inf = diff(LOGADDEXP_WINDOW, [p, np.float32(-np.inf)], worker=worker)
    assert minus_inf.verdict == "match", minus_inf.summary()


ADD_ONE_DEVICE = """HloModule m

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  x = f32[2] parameter(0)
  ROOT r = f32[2] COLLECTIVE
}
"""


@pytest.mark.parametrize("collective, xla_value", [
    ("all-reduce(x), replica_groups={{0,1}}, to_apply=add", [1, 2]),
    ("collective-permute(x), source_target_pairs={{0,1}}", [0, 0])])
def test_a_collective_naming_a_device_the_run_lacks_is_undetermined_on_xla_cpu(
        worker, collective, xla_value):
    """One device, groups or pairs naming replica 1: the spec's 0 <= id < num_replicas
    does not hold; XLA's verifier lets it through (replica_count 1) and XLA:CPU gives a
    value of its own (the operand, zeros); hloref stops, and the verdict is undetermined."""
    text = ADD_ONE_DEVICE.replace("COLLECTIVE", collective)
    x = np.array([1, 2], np.float32)
    got = worker.run(text, [x])
    assert got.ok and got.value.tolist() == xla_value, got.message
    report = diff(text, [x], worker=worker)
    assert report.verdict == "undetermined", report.summary()
    assert report.undetermined == "collective-outside-domain"
    assert "%r" in report.message and "names replica 1" in report.message


def test_a_collective_inside_its_domain_is_still_compared(worker):
    text = ADD_ONE_DEVICE.replace("COLLECTIVE", "all-reduce(x), replica_groups={{0}}, "
                                  "to_apply=add")
    report = diff(text, [np.array([1, 2], np.float32)], worker=worker)
    assert report.verdict == "match" and report.undetermined is None


def test_which_collectives_are_outside_their_domain():
    """By the spec's constraints, per group mode: replica ids below replica_count,
    partition ids (channel_id without use_global_device_ids' field) below
    num_partitions, flattened ids below their product; collective-broadcast's groups
    (which XLA's verifier does not check) each id once."""
    import hloref
    from hloref.fuzz.collective_domain import outside_domain
    head = "HloModule m, replica_count=2, num_partitions=2\n" + ADD_ONE_DEVICE.split("\n", 1)[1]

    def names(collective):
        return outside_domain(hloref.parse(head.replace("COLLECTIVE", collective)))

    assert names("all-reduce(x), replica_groups={{0,1}}, to_apply=add") == []
    assert names("all-to-all(x), channel_id=1, replica_groups={{0,1}}, dimensions={0}") == []
    assert names("all-reduce(x), channel_id=1, replica_groups={{0,3},{1,2}}, "
                 "use_global_device_ids=true, to_apply=add") == []
    assert names("collective-permute(x), channel_id=1, source_target_pairs={{0,1}}") == []
    [(name, why)] = names("collective-broadcast(x), channel_id=1, replica_groups={{0,2}}")
    assert name == "r" and "names partition 2, but the module runs on 2 partition(s)" in why
    [(_, why)] = names("collective-broadcast(x), replica_groups={{1,1}}")
    assert "names replica 1 more than once" in why
    [(_, why)] = names("all-gather(x), channel_id=1, replica_groups={{0,4}}, "
                       "use_global_device_ids=true, dimensions={0}")
    assert "names device 4, but the module runs on 4 device(s)" in why


PADDING_READ = """HloModule m

ENTRY e {
  x = f32[4] parameter(0)
  n = s32[] parameter(1)
  d = f32[<=4] set-dimension-size(x, n), dimensions={0}
  i = s32[2,1] constant({{0},{3}})
  two = s32[] constant(2)
  ROOT r = READ
}
"""


@pytest.mark.parametrize("read, padded", [
    ("f32[2] dynamic-slice(d, two), dynamic_slice_sizes={2}", 1),
    ("f32[1] slice(d), slice={[3:4]}", 0),
    ("f32[2] gather(d, i), offset_dims={}, collapsed_slice_dims={0}, start_index_map={0}, "
     "index_vector_dim=1, slice_sizes={1}", 1)])
def test_padding_read_inside_the_module_is_undetermined_on_xla_cpu(worker, read, padded):
    """Three of four elements at runtime; the instruction reads element 3, padding. XLA:CPU
    returns the buffer's content there (the parameter's own element 3, so its value
    follows that input: 7, then 9); hloref stops and the verdict is undetermined."""
    text = PADDING_READ.replace("READ", read)
    for pad in (7, 9):
        got = worker.run(text, [np.array([1, 2, 3, pad], np.float32), np.int32(3)])
        assert got.ok and got.value[padded] == pad, got.message
    report = diff(text, [np.array([1, 2, 3, 7], np.float32), np.int32(3)], worker=worker)
    assert report.verdict == "undetermined", report.summary()
    assert report.undetermined == "dynamic-padding-read"
    assert "%r" in report.message and "reads the padding" in report.message


def test_a_read_inside_the_valid_part_is_still_compared(worker):
    text = PADDING_READ.replace("READ", "f32[1] slice(d), slice={[2:3]}")
    report = diff(text, [np.array([1, 2, 3, 7], np.float32), np.int32(3)], worker=worker)
    assert report.verdict == "match" and report.undetermined is None


def test_an_unsupported_dynamic_case_that_reads_no_padding_stays_unsupported():
    """A dynamic update of dynamic-update-slice: refused (XLA:CPU fails to compile it),
    no padding read, so no undetermined verdict."""
    text = """HloModule m

ENTRY e {
  x = f32[4] parameter(0)
  u = f32[2] parameter(1)
  n = s32[] parameter(2)
  d = f32[<=2] set-dimension-size(u, n), dimensions={0}
  z = s32[] constant(0)
  ROOT r = f32[4] dynamic-update-slice(x, d, z)
}
"""
    report = diff(text, [np.zeros(4, np.float32), np.ones(2, np.float32), np.int32(1)],
                  localize=False, oracle_value=np.zeros(4, np.float32))
    assert report.verdict == "unsupported" and report.undetermined is None
