"""rng-get-and-update-state in the computations of scatter and sort, in one-device
collectives' reducers, and at dead sites, on the device in the serial mode
(``gpu/serial.py``), ``fallback=False``: the CPU's call orders (``evaluator/indexing.py``,
``evaluator/sort.py``: libstdc++'s stable sort, one call per comparison). Results against
the CPU backend bit for bit, and by hand from the written semantics (see
test_gpu_computation_rng_state_serial.py).
"""

from __future__ import annotations

import numpy as np

from gpu_check import bits_equal

from hlo_modules import dead_site_computation, parameters, random_bit_compare, state_bracket
from rng_state_common import M32, S0, both, read_low, words


SCATTER = """HloModule m
comb {
  a = u32[] parameter(0)
  b = u32[] parameter(1)
%(l)s  k = u32[] convert(l)
  ab = u32[] multiply(a, b)
  ROOT r = u32[] add(ab, k)
}
""" + state_bracket(parameters("x = u32[6]", "idx = s32[5,1]", "upd = u32[5,2]"),
                    """\
  r = u32[6] scatter(x, idx, upd), update_window_dims={1}, inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=comb
""",
                    [("rc", "u64[6]")],
                    tail="  rc = u64[6] convert(r)\n")


def test_scatter_by_hand():
    """Windows of 2 at indices 1, 5 (out of bounds: skipped, no call), 2, 1, -1
    (skipped): the CPU combines update by update, scatter index by index, each window in
    order: ``x[t] = x[t] u + low word`` with a delta carrying into the high word."""
    d = 2**64 - 3
    x = np.arange(1, 7, dtype=np.uint32)
    idx = np.array([[1], [5], [2], [1], [-1]], np.int32)
    upd = (np.arange(10, dtype=np.uint32) + 2).reshape(5, 2)
    cpu, gpu = both(SCATTER % {"l": read_low("l", d)}, x, idx, upd)
    assert bits_equal(gpu, cpu), (gpu, cpu)
    s = S0 + 100
    out = x.astype(np.int64).tolist()
    for (i,), u in zip(idx.tolist(), upd.tolist()):
        if i < 0 or i + 2 > 6:
            continue
        for w in range(2):
            out[i + w] = (out[i + w] * u[w] + words(s)[0]) & M32
            s += d
    want = words(S0) + out + words(s)
    assert bits_equal(cpu, np.array(want, np.uint64)), cpu


VARIADIC_SCATTER = """HloModule m
comb {
  a = f32[] parameter(0)
  i = s32[] parameter(1)
  b = f32[] parameter(2)
  j = s32[] parameter(3)
  s = u64[2] rng-get-and-update-state(), delta=-1
  lo = u64[1] slice(s), slice={[0:1]}
  l = u64[] reshape(lo)
  k = s32[] convert(l)
  ab = f32[] add(a, b)
  ij = s32[] xor(i, k)
  ROOT r = (f32[], s32[]) tuple(ab, ij)
}
""" + state_bracket(parameters("x = f32[4,3]", "y = s32[4,3]", "idx = s32[3,2]",
                               "u = f32[3,2]", "v = s32[3,2]"),
                    """\
  r = (f32[4,3], s32[4,3]) scatter(x, y, idx, u, v), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0,1}, index_vector_dim=1, to_apply=comb
""",
                    [("r", "(f32[4,3], s32[4,3])")])


def test_scatter_variadic():
    """Two operands, a tuple-valued combiner, 2-D indices (one window out of bounds),
    a negative delta (the state wraps below zero): CPU bit for bit; the state moves by
    one delta per applied update (2 windows of 2)."""
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    y = np.arange(12, dtype=np.int32).reshape(4, 3) * 7
    idx = np.array([[1, 0], [3, 2], [1, 1]], np.int32)
    u = np.arange(6, dtype=np.float32).reshape(3, 2) + 0.5
    v = np.arange(6, dtype=np.int32).reshape(3, 2) * 3
    cpu, gpu = both(VARIADIC_SCATTER, x, y, idx, u, v)
    assert bits_equal(gpu, cpu), (gpu, cpu)
    assert [int(w) for w in cpu[2]] == words(S0 + 100 - 4)


SORT = "HloModule m\n" + random_bit_compare(
    "less", ("a = f32[]", "b = f32[]", "i = s32[]", "j = s32[]"), "%d") + state_bracket(
    parameters("x = f32[%(rows)d,%(n)d]") + "  i = s32[%(rows)d,%(n)d] iota(), iota_dimension=1\n",
    "  r = (f32[%(rows)d,%(n)d], s32[%(rows)d,%(n)d]) sort(x, i), dimensions={1}, to_apply=less\n",
    [("r", "(f32[%(rows)d,%(n)d], s32[%(rows)d,%(n)d])")])


def test_sort_pairs_by_hand():
    """Rows of two: libstdc++'s stable sort compares once, ``less(x[1], x[0])`` (its
    final merge), and swaps when true; the comparator answers whether the low word of
    the state its call reads is even, row r's call reading S + 100 + r d."""
    d = 2**64 + 1
    text = SORT.replace("%(rows)d", "5").replace("%(n)d", "2") % d
    x = np.arange(10, dtype=np.float32).reshape(5, 2)
    cpu, gpu = both(text, x)
    assert bits_equal(gpu, cpu), (gpu, cpu)
    for r in range(5):
        swap = words(S0 + 100 + r * d)[0] % 2 == 0
        assert cpu[1][1][r].tolist() == ([1, 0] if swap else [0, 1])
    assert [int(w) for w in cpu[2]] == words(S0 + 100 + 5 * d)


def test_sort_random_comparator():
    """A comparator answering the state's low bit (no order at all): the CPU's libstdc++
    stable sort and the device's make the same calls in the same order, so the same
    permutations (rows of 9 and of 13: insertion-sort chunks and buffered merges)."""
    for rows, n in ((3, 9), (2, 13)):
        text = SORT.replace("%(rows)d", str(rows)).replace("%(n)d", str(n)) % 3
        x = np.random.default_rng(n).standard_normal((rows, n)).astype(np.float32)
        cpu, gpu = both(text, x)
        assert bits_equal(gpu, cpu), (gpu, cpu)
        assert int(cpu[2][0]) > int(cpu[0][0]) + 100


ALL_REDUCE = """HloModule m
red {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ab = f32[] add(a, b)
%(l)s  c = f32[] convert(l)
  ROOT r = f32[] add(ab, c)
}
""" + state_bracket(parameters("x = f32[4]"),
                    """\
  r = f32[4] all-reduce(x), to_apply=red, replica_groups={}
  g = f32[4] reduce-scatter(x), dimensions={0}, to_apply=red, replica_groups={}
""",
                    [("r", "f32[4]"), ("g", "f32[4]")])


def test_one_device_collectives_never_call_the_reducer():
    """On one device each group has one participant: the CPU's all-reduce and
    reduce-scatter give the operand without calling the reducer (which would add the
    low word of the state it reads), so the state moves only by the first read's 100."""
    x = np.array([1.5, -2, 3, 0.25], np.float32)
    cpu, gpu = both(ALL_REDUCE % {"l": read_low("l", 11)}, x)
    assert bits_equal(gpu, cpu), (gpu, cpu)
    assert bits_equal(cpu[1], x) and bits_equal(cpu[2], x)
    assert [int(w) for w in cpu[3]] == words(S0 + 100)


DEAD_SITE_SCATTER = "HloModule m\n" + dead_site_computation(
    "comb", "%(t)s", 9, "ROOT r = %(t)s[] %(op)s(a, b)") + state_bracket(
                    parameters("x = %(t)s[4]", "idx = s32[3,1]", "upd = %(t)s[3]"),
                    """\
  r = %(t)s[4] scatter(x, idx, upd), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=comb
""",
                    [("r", "%(t)s[4]")])


def test_scatter_root_op_with_a_dead_site():
    """``ROOT op(a, b)`` beside a dead site of delta 9: no fast path replaces the
    computation by its root (``evaluator.reduce.reads_everything``: the site is evaluated
    for its effect), so every backend calls it update by update, twice (index 7 is out
    of bounds), for an integer add too."""
    idx = np.array([[1], [7], [3]], np.int32)
    for t, op, dtype, calls in [("u32", "add", np.uint32, 2), ("pred", "or", bool, 2),
                                ("bf16", "add", np.dtype("bfloat16"), 2)]:
        x = np.array([1, 0, 1, 0]).astype(dtype)
        upd = np.array([1, 1, 0]).astype(dtype)
        cpu, gpu = both(DEAD_SITE_SCATTER % {"t": t, "op": op}, x, idx, upd)
        assert bits_equal(gpu, cpu), (t, gpu, cpu)
        assert [int(w) for w in cpu[2]] == words(S0 + 100 + 9 * calls), t
        assert cpu[1].astype(np.float32).tolist() == [1, 1, 1, 0], t


DEAD_SITE_SELECT_AND_SCATTER = "HloModule m\n" + dead_site_computation(
    "sel", "u32", 5, "ROOT p = pred[] compare(a, b), direction=GE") + dead_site_computation(
    "sct", "u32", 7, "ROOT r = u32[] add(a, b)") + state_bracket(
                    parameters("x = u32[5]", "src = u32[3]") + "  i = u32[] constant(1000)\n",
                    """\
  r = u32[5] select-and-scatter(x, src, i), window={size=3 stride=2 pad=1_1}, select=sel, scatter=sct
""",
                    [("r", "u32[5]")])


def test_select_and_scatter_root_ops_with_dead_sites():
    """A ``compare`` select and an ``add`` scatter, each beside a dead site: the CPU
    has no fast path for either (it calls select 5 times and scatter 3 times, the
    windows of ``test_select_and_scatter_by_hand``), and the device makes the calls."""
    x = np.arange(5, dtype=np.uint32)
    src = np.array([10, 20, 30], np.uint32)
    cpu, gpu = both(DEAD_SITE_SELECT_AND_SCATTER, x, src)
    assert bits_equal(gpu, cpu), (gpu, cpu)
    assert cpu[1].tolist() == [1000, 1010, 1000, 1020, 1030]
    assert [int(w) for w in cpu[2]] == words(S0 + 100 + 5 * 5 + 3 * 7)
