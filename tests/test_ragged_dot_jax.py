"""ragged-dot against jax.lax.ragged_dot_general run by XLA:CPU (jaxlib 0.10.2).

XLA:CPU does not run the HLO ``ragged-dot`` itself; on CPU, jax lowers
``ragged_dot_general`` to its reference expansion (mask the lhs per group, then
``dot_general``), which XLA:CPU runs. That expansion is the semantics compared here:
all three modes (ragged dim non-contracting / contracting / batch), zero-sized
groups, group sizes summing to less or more than the ragged dimension (rows past the
total give 0), batch dims and per-batch ``group_sizes`` of shape ``[b..., x..., g]``.
Small integer operands keep every sum exact, so values must agree exactly.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import hloref

jax = pytest.importorskip("jax")
from jax import lax  # noqa: E402


def _text(lhs, rhs, gs, contr, batch, ragged, group, out_shape):
    def t(x):
        return "{" + ",".join(map(str, x)) + "}"

    def sh(a, et="f32"):
        return f"{et}[{','.join(map(str, a.shape))}]"
    group_attr = f", rhs_group_dims={t(group)}" if group else ""
    return f"""HloModule m
ENTRY e {{
  a = {sh(lhs)} parameter(0)
  b = {sh(rhs)} parameter(1)
  g = {sh(gs, "s32")} parameter(2)
  ROOT r = f32[{','.join(map(str, out_shape))}] ragged-dot(a, b, g), lhs_batch_dims={t(batch[0])}, rhs_batch_dims={t(batch[1])}, lhs_contracting_dims={t(contr[0])}, rhs_contracting_dims={t(contr[1])}, lhs_ragged_dims={t(ragged)}{group_attr}
}}"""


# name: (lhs shape, rhs shape, group_sizes shape, contracting, batch, ragged, group dims)
CASES = {
    "noncontracting": ((7, 3), (3, 3, 4), (3,), ((1,), (1,)), ((), ()), (0,), (0,)),
    "noncontracting_batch": ((2, 7, 3), (2, 3, 3, 4), (3,), ((2,), (2,)), ((0,), (0,)), (1,),
                             (1,)),
    "noncontracting_per_batch": ((2, 7, 3), (2, 3, 3, 4), (2, 3), ((2,), (2,)), ((0,), (0,)),
                                 (1,), (1,)),
    "noncontracting_group_dim_first": ((2, 7, 3), (3, 2, 3, 4), (2, 3), ((2,), (2,)),
                                       ((0,), (1,)), (1,), (0,)),
    "noncontracting_outer_free_dim": ((2, 7, 3), (3, 3, 4), (2, 3), ((2,), (1,)), ((), ()),
                                      (1,), (0,)),
    "noncontracting_batch_and_outer": ((2, 3, 5, 4), (2, 3, 4, 6), (2, 3, 3), ((3,), (2,)),
                                       ((0,), (0,)), (2,), (1,)),
    "noncontracting_batch_after_ragged": ((5, 2, 4), (3, 2, 4, 6), (2, 3), ((2,), (2,)),
                                          ((1,), (1,)), (0,), (0,)),
    "contracting": ((4, 6), (6, 5), (3,), ((1,), (0,)), ((), ()), (1,), ()),
    "contracting_per_batch": ((2, 4, 6), (2, 6, 5), (2, 3), ((2,), (1,)), ((0,), (0,)), (2,),
                              ()),
    "contracting_outer_contracting": ((3, 2, 6), (2, 6, 4), (2, 3), ((1, 2), (0, 1)), ((), ()),
                                      (2,), ()),
    "contracting_listed_order": ((3, 6, 2), (2, 6, 4), (2, 3), ((2, 1), (0, 1)), ((), ()),
                                 (1,), ()),
    "batch": ((3, 4, 6), (3, 6, 5), (2,), ((2,), (1,)), ((0,), (0,)), (0,), ()),
    "batch_outer_batch": ((2, 3, 4, 5), (2, 3, 5, 2), (2, 2), ((3,), (2,)), ((0, 1), (0, 1)),
                          (1,), ()),
}


def _group_sizes(rng, shape, ragged_len, kind):
    g = shape[-1]
    if kind == "random":
        return rng.integers(0, ragged_len // max(g - 1, 1) + 2, shape).astype(np.int32)
    if kind == "zeros":
        return np.zeros(shape, np.int32)
    if kind == "one_group":  # everything in the middle group, the others empty
        out = np.zeros(shape, np.int32)
        out[..., g // 2] = ragged_len
        return out
    if kind == "short":  # sums below the ragged dim: the tail rows are in no group
        out = np.zeros(shape, np.int32)
        out[..., 0] = max(ragged_len - 2, 0)
        return out
    return np.full(shape, ragged_len, np.int32)  # "over": sums past the ragged dim


@pytest.mark.parametrize("kind", ["random", "zeros", "one_group", "short", "over"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_ragged_dot_matches_jax_on_xla_cpu(case, kind):
    ls, rs, gshape, contr, batch, ragged, group = CASES[case]
    rng = np.random.default_rng(zlib.crc32(f"{case}-{kind}".encode()))
    lhs = rng.integers(-3, 4, ls).astype(np.float32)
    rhs = rng.integers(-3, 4, rs).astype(np.float32)
    gs = _group_sizes(rng, gshape, ls[ragged[0]], kind)
    dn = lax.RaggedDotDimensionNumbers(dot_dimension_numbers=(contr, batch),
                                       lhs_ragged_dimensions=list(ragged),
                                       rhs_group_dimensions=list(group))
    with jax.default_device(jax.devices("cpu")[0]):
        want = np.asarray(jax.jit(lambda a, b, g: lax.ragged_dot_general(a, b, g, dn))(
            lhs, rhs, gs))
    got = hloref.evaluate(_text(lhs, rhs, gs, contr, batch, ragged, group, want.shape),
                          lhs, rhs, gs)
    np.testing.assert_array_equal(got, want)


def test_group_sizes_of_another_shape_is_refused():
    ls, rs, _, contr, batch, ragged, group = CASES["noncontracting_per_batch"]
    lhs, rhs = np.ones(ls, np.float32), np.ones(rs, np.float32)
    gs = np.ones((3, 3), np.int32)  # the batch has 2 elements
    with pytest.raises(hloref.HloUnsupportedError):
        hloref.evaluate(_text(lhs, rhs, gs, contr, batch, ragged, group, (2, 7, 4)),
                        lhs, rhs, gs)
