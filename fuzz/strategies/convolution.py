"""The convolution maker, and ``conv_configs()``: convolution configurations valid by
construction (``ConvConfig``: the operand shapes, ``window``, ``dim_labels`` and the
group counts), shared by the maker and the tests.

The maker calls ``draw_conv_config`` inside its own draw (no Hypothesis span of its
own, so the campaign's programs for a seed do not depend on how the code is split).
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from hloref.attrs import ConvDimensionNumbers, Window, WindowDim

from .builder import Builder
from .shapes import validate_bounds


@dataclass(frozen=True)
class ConvConfig:
    """A convolution's geometry: ``lhs_dims``/``rhs_dims`` (input and kernel shapes),
    ``window`` (one ``WindowDim`` per spatial dimension), ``dim_labels`` and the
    feature and batch group counts (at most one of them above 1)."""

    lhs_dims: tuple[int, ...]
    rhs_dims: tuple[int, ...]
    window: Window
    dim_labels: ConvDimensionNumbers
    feature_group_count: int
    batch_group_count: int

    def attrs(self) -> dict:
        """The HLO attributes (no ``window`` without spatial dims, group counts above 1)."""
        out = {}
        if self.window.dims:
            out["window"] = self.window
        out["dim_labels"] = self.dim_labels
        if self.feature_group_count > 1:
            out["feature_group_count"] = self.feature_group_count
        if self.batch_group_count > 1:
            out["batch_group_count"] = self.batch_group_count
        return out


def _mostly_one(most: int) -> list[int]:
    """1 three times out of four when ``most`` is 2 (``[1, 1, 1, 2]``)."""
    return [1, 1, 1] + list(range(2, most + 1))


def _dilations(most: int) -> list[int]:
    return [1, 1] + list(range(2, most + 1))


def draw_conv_config(draw, *, min_spatial: int = 0, max_spatial: int = 2, max_stride: int = 2,
                     min_padding: int = 0, max_padding: int = 2, max_base_dilation: int = 2,
                     max_window_dilation: int = 2, max_group_count: int = 2) -> ConvConfig:
    """``conv_configs()`` drawn with ``draw`` inside a caller's draw."""
    ns = draw(st.integers(min_spatial, max_spatial))
    groups = draw(st.sampled_from(_mostly_one(max_group_count)))
    batch_groups = draw(st.sampled_from(_mostly_one(max_group_count))) if groups == 1 else 1
    batch = batch_groups * draw(st.integers(1, 2))
    fin = groups * draw(st.integers(1, 3))
    fout = groups * batch_groups * draw(st.integers(1, 2))
    spatial = [draw(st.integers(1, 6)) for _ in range(ns)]
    window = []
    for _ in spatial:
        ksz = draw(st.integers(1, 3))
        window.append(WindowDim(ksz, draw(st.integers(1, max_stride)),
                                draw(st.integers(min_padding, max_padding)),
                                draw(st.integers(min_padding, max_padding)),
                                draw(st.sampled_from(_dilations(max_window_dilation))),
                                draw(st.sampled_from(_dilations(max_base_dilation))),
                                draw(st.integers(0, 5)) == 0))
    n = ns + 2
    ip = draw(st.permutations(list(range(n))))
    kp = draw(st.permutations(list(range(n))))
    op = draw(st.permutations(list(range(n))))
    dn = ConvDimensionNumbers(ip[0], ip[1], tuple(ip[2:]), kp[0], kp[1], tuple(kp[2:]),
                              op[0], op[1], tuple(op[2:]))
    idims = [0] * n
    idims[ip[0]], idims[ip[1]] = batch, fin
    for i, s in enumerate(spatial):
        idims[ip[2 + i]] = s
    kdims = [0] * n
    kdims[kp[0]], kdims[kp[1]] = fin // groups, fout
    for i, w in enumerate(window):
        kdims[kp[2 + i]] = w.size
    return ConvConfig(tuple(idims), tuple(kdims), Window(tuple(window)), dn, groups, batch_groups)


def conv_configs(*, min_spatial: int = 0, max_spatial: int = 2, max_stride: int = 2,
                 min_padding: int = 0, max_padding: int = 2, max_base_dilation: int = 2,
                 max_window_dilation: int = 2,
                 max_group_count: int = 2) -> st.SearchStrategy[ConvConfig]:
    """Convolution configurations (``ConvConfig``), valid by construction: spatial rank
    in [min_spatial, max_spatial] (sizes 1-6, kernel sizes 1-3), every ``dim_labels``
    part a random permutation, strides up to ``max_stride``, padding (low and high) in
    [min_padding, max_padding] (negative trims), base (lhs) and window (rhs) dilations
    up to their maximum (1 half the time or more), window reversal now and then, and a
    feature or a batch group count up to ``max_group_count`` (1 three times in four)."""
    validate_bounds("spatial", min_spatial, max_spatial)
    if max_spatial > 3:
        raise InvalidArgument(f"max_spatial={max_spatial} must be <= 3")
    validate_bounds("stride", 1, max_stride, minimum=1)
    if not isinstance(min_padding, int) or not isinstance(max_padding, int) \
            or min_padding > max_padding:
        raise InvalidArgument(f"min_padding={min_padding!r} must be an integer <= "
                              f"max_padding={max_padding!r}")
    validate_bounds("base_dilation", 1, max_base_dilation, minimum=1)
    validate_bounds("window_dilation", 1, max_window_dilation, minimum=1)
    validate_bounds("group_count", 1, max_group_count, minimum=1)

    @st.composite
    def configs(draw):
        return draw_conv_config(draw, min_spatial=min_spatial, max_spatial=max_spatial,
                                max_stride=max_stride, min_padding=min_padding,
                                max_padding=max_padding, max_base_dilation=max_base_dilation,
                                max_window_dilation=max_window_dilation,
                                max_group_count=max_group_count)
    return configs()


def make_convolution(b: Builder):
    et = b.pick_type("fcs")
    cfg = draw_conv_config(b.draw)
    lhs = b.operand(et=et, dims=cfg.lhs_dims)
    rhs = b.operand(et=et, dims=cfg.rhs_dims)
    return b.add("convolution", [lhs, rhs], cfg.attrs())
