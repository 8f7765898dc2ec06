"""Bounded dynamic shapes: the size rules of the ops that move elements between
dimensions (``reshape``, ``dynamic-reshape``, ``gather``, ``scatter``), by XLA's
``DynamicDimensionInferenceVisitor`` (``HandleReshape``, ``HandleGather``,
``HandleScatter``) and dynamic padder, measured on XLA:CPU (jaxlib 0.10.2); and the
side-table helpers they share with ``evaluator/dynamic.py`` (``normal_sizes``,
``merge_sizes``). ``evaluator/dynamic.py``'s ``dynamic_step`` is the entry that calls
them (its docstring describes the side table and the *arrays* object)."""

from __future__ import annotations

import math

import numpy as np

from hloref.errors import HloEvalError
from hloref.shapes import TupleShape

__all__ = ["normal_sizes", "merge_sizes", "dynamic_reshape_step", "common_factors",
           "reshape_step", "check_declared", "gather_step", "scatter_step"]


def normal_sizes(sizes, dims):
    """``None`` when ``sizes`` equal the static ``dims`` (a static value)."""
    if sizes is None:
        return None
    sizes = tuple(int(s) for s in sizes)
    return None if sizes == tuple(dims) else sizes


def merge_sizes(opcode, instr, sizes_list, rank=None):
    """One runtime size per dimension from several operands of the same dimensions:
    the dynamic operands must agree; static operands take their size."""
    merged = None
    for s in sizes_list:
        if s is None or (rank is not None and len(s) != rank):
            continue
        if merged is not None and tuple(merged) != tuple(s):
            raise HloEvalError(f"{opcode}: operands have different runtime dimension "
                               f"sizes {list(merged)} and {list(s)}", instruction=instr.name)
        merged = s
    return merged


def dynamic_reshape_step(instr, operands, sizes, arrays):
    """``dynamic-reshape(x, d0, d1, ...)``: the valid elements of ``x`` in row-major
    order, laid out as ``d0 x d1 x ...`` (each within its bound)."""
    shape = instr.shape
    x = arrays.valid_part(operands[0], sizes[0])
    dims = [int(arrays.to_host(v)) for v in operands[1:]]
    for d, (n, bound) in enumerate(zip(dims, shape.dims)):
        if not 0 <= n <= bound:
            raise HloEvalError(f"dynamic-reshape: size {n} outside [0, {bound}] for dimension "
                               f"{d}", instruction=instr.name)
    if math.prod(dims) != x.size:
        raise HloEvalError(f"dynamic-reshape: {x.size} valid elements cannot take the "
                           f"dimensions {dims}", instruction=instr.name)
    valid = arrays.reshape(x, dims)
    return arrays.embed(valid, shape.dims), normal_sizes(dims, shape.dims)


def common_factors(a, b):
    """XLA's ``CommonFactors`` (``xla/util.cc``): the ``(i, j)`` bounds of the groups of
    dimensions of ``a`` and ``b`` with equal products (``a[i0:i1]`` <-> ``b[j0:j1]``)."""
    a, b = tuple(a), tuple(b)
    if a == b:
        return [(i, i) for i in range(len(a) + 1)]
    bounds = []
    i = j = 0
    prior_i = prior_j = -1
    while i < len(a) and j < len(b) and a[i] == b[j]:
        prior_i, prior_j = i, j
        bounds.append((i, j))
        i += 1
        j += 1
    if math.prod(a[i:]) != math.prod(b[j:]):
        return [(0, 0), (len(a), len(b))]
    if math.prod(a[i:]) == 0:
        return bounds + [(i, j), (len(a), len(b))]
    pa = pb = 1
    while True:
        if pa == pb and (i > prior_i or j > prior_j):
            prior_i, prior_j = i, j
            bounds.append((i, j))
            continue
        in_i, in_j = i < len(a), j < len(b)
        if not (in_i or in_j):
            break
        next_a = pa < pb or (in_i and (not in_j or (pa == pb and a[i] <= b[j])))
        next_b = pb < pa or (in_j and (not in_i or (pb == pa and b[j] <= a[i])))
        if next_a:
            pa *= a[i]
            i += 1
        if next_b:
            pb *= b[j]
            j += 1
    return bounds


def reshape_step(instr, kwargs, operands, sizes, finish, unsupported, arrays):
    """A reshape of a runtime-sized operand, by XLA's rules
    (``DynamicDimensionInferenceVisitor::HandleReshape``; data as the dynamic padder's
    reshape rewrites lay it out): the operand's dimensions and the result's are split
    into common-factor groups; a dynamic input dimension gives one result dimension of
    its group a runtime size (the same dimension when the group maps one to one, the
    combined size ``bound / in_bound * n`` when input dimensions are merged, ``n /
    (in_bound / out_bound)`` on the dimension picked by ``inferred_dimension``, the
    result's ``<=`` dimension or the only non-degenerate one when it is split, the
    total valid count over the other dimensions on ``inferred_dimension`` when a group
    both merges and splits). The result holds the operand's valid elements in row-major
    order laid out in the result's runtime sizes (at the origin of the bound). Refused:
    what XLA refuses or cannot tell (no dimension to pick, a degenerate dynamic
    dimension in the middle, a runtime size that the group's sizes do not divide)."""
    x = operands[0]
    in_dims, out_dims = tuple(x.shape), tuple(instr.shape.dims)
    in_sizes = tuple(sizes[0])
    dyn = [d for d, (n, b) in enumerate(zip(in_sizes, in_dims)) if n != b]
    what = f"reshape {list(in_dims)} -> {list(out_dims)} of dynamic dimension(s) {dyn}"
    if not out_dims:
        raise unsupported(f"{what}: a scalar result of a dynamic operand (XLA leaves it "
                          f"undefined)")
    factors = common_factors(in_dims, out_dims)
    groups = list(zip(factors, factors[1:]))

    def group_of(d):
        for (i0, j0), (i1, j1) in groups:
            if i0 <= d < i1:
                return (i0, i1), (j0, j1)
        raise unsupported(f"{what}: no common-factor group holds the dimension")

    inferred = kwargs.get("inferred_dimension")
    inferred = -1 if inferred is None else int(inferred)
    need_flat = inferred != -1 and out_dims[inferred] == 1
    for d in dyn:
        (i0, i1), (j0, j1) = group_of(d)
        if i1 - i0 > 1 and j1 - j0 > 1:
            need_flat = True
    out = list(out_dims)
    if need_flat:
        if inferred == -1:
            raise unsupported(f"{what}: a group both merges and splits dimensions and the "
                              f"reshape has no inferred_dimension (XLA refuses it)")
        rest = math.prod(out_dims) // out_dims[inferred] if out_dims[inferred] else 0
        total = math.prod(in_sizes)
        if rest == 0 or total % rest:
            raise unsupported(f"{what}: {total} valid elements do not fill whole rows of "
                              f"the other {rest} result elements")
        out[inferred] = total // rest
        checks = [((0, len(in_dims)), (0, len(out_dims)))]
    else:
        checks = []
        for d in dyn:
            n = in_sizes[d]
            (i0, i1), (j0, j1) = group_of(d)
            checks.append(((i0, i1), (j0, j1)))
            e = -1
            if in_dims[d] == 1:  # only most-major or most-minor (XLA)
                if d == 0:
                    e = 0
                elif d == len(in_dims) - 1:
                    e = len(out_dims) - 1
                else:
                    raise unsupported(f"{what}: a degenerate dynamic dimension neither "
                                      f"most-major nor most-minor (XLA refuses it)")
            if e == -1 and j1 - j0 == 1:
                e = j0
            if e == -1 and j1 - j0 > 1:  # split: which result dimension is dynamic
                e = inferred
                if e == -1:
                    declared = [k for k in range(j0, j1) if instr.shape.dynamic[k]]
                    if declared:
                        e = declared[-1]
                if e == -1:
                    big = [k for k in range(j0, j1) if out_dims[k] != 1]
                    if len(big) == 1:
                        e = big[0]
                if e == -1:
                    raise unsupported(f"{what}: the dimension is split and no result "
                                      f"dimension is marked dynamic (XLA cannot tell which)")
            if not j0 <= e < j1:  # a degenerate dimension's group is empty: check both
                (k0, k1), (l0, l1) = next(((i0_, i1_), (j0_, j1_))
                                          for (i0_, j0_), (i1_, j1_) in groups
                                          if j0_ <= e < j1_)
                checks[-1] = ((min(i0, k0), max(i1, k1)), (min(j0, l0), max(j1, l1)))
            ib, ob = in_dims[d], out_dims[e]
            if ib == ob:
                out[e] = n
            elif ib > ob:
                if ob == 0 or ib % ob:
                    raise unsupported(f"{what}: bound {ib} is not a multiple of {ob}")
                out[e] = n // (ib // ob)
            else:
                out[e] = out[e] // ib * n
    for (i0, i1), (j0, j1) in checks:
        if math.prod(in_sizes[i0:i1]) != math.prod(out[j0:j1]):
            raise unsupported(f"{what}: runtime sizes {list(in_sizes)} give result sizes "
                              f"{out}, which do not hold the same valid elements (XLA's "
                              f"size arithmetic truncates; the data is not defined)")
    valid = arrays.reshape(arrays.compact(arrays.valid_part(x, in_sizes)), out)
    return finish(valid)


def check_declared(instr, out, unsupported):
    """``out`` as an entry; refuses a runtime size below the bound of a dimension the
    instruction's shape declares static (XLA would read padding there)."""
    shape = instr.shape
    for d, (n, bound) in enumerate(zip(out, shape.dims)):
        if n < bound and not shape.dynamic[d]:
            raise unsupported(f"result dimension {d} is static ({bound}) in the "
                              f"instruction's shape but only {n} of its elements are "
                              f"defined (XLA reads padding there)", reads_padding=True)
    return normal_sizes(out, shape.dims)


def gather_step(instr, fn, kwargs, operands, sizes, unsupported, arrays):
    """``gather`` by XLA's rules (``HandleGather``): a dynamic batch dimension of the
    indices gives the matching result batch dimension its size; a dynamic operand
    dimension gathered whole (slice size = bound, so its start is 0) gives its offset
    dimension the size; one gathered with slice size 1 becomes static (evaluated only
    when every valid index vector, clamped, reads a valid position, else refused as
    reading padding). Any other slice of a dynamic operand dimension is refused (XLA
    refuses it). Evaluated on the padded arrays: padding reaches only padding."""
    x, indices = operands
    xs = tuple(sizes[0] or x.shape)
    iss = tuple(sizes[1] or indices.shape)
    ivd = int(kwargs["index_vector_dim"])
    offset_dims = tuple(kwargs["offset_dims"])
    collapsed = tuple(kwargs["collapsed_slice_dims"])
    obd = tuple(kwargs.get("operand_batching_dims", ()) or ())
    start_map = tuple(kwargs["start_index_map"])
    slice_sizes = tuple(kwargs["slice_sizes"])
    out = list(instr.shape.dims)
    batch_out = [o for o in range(len(out)) if o not in offset_dims]
    batch_in = [k for k in range(indices.ndim) if k != ivd]
    for d, (n, b) in enumerate(zip(iss, indices.shape)):
        if n == b:
            continue
        if d == ivd:
            raise unsupported("gather with a dynamic index vector dimension (XLA refuses it)")
        out[batch_out[batch_in.index(d)]] = n
    offset_operand = [d for d in range(x.ndim) if d not in collapsed and d not in obd]
    host_idx = None
    for d, (n, b) in enumerate(zip(xs, x.shape)):
        if n == b:
            continue
        if slice_sizes[d] == 1:
            if d in obd:
                raise unsupported(f"gather over dynamic operand batching dimension {d}")
            if d not in start_map:
                if n == 0:
                    raise unsupported(f"gather reads position 0 of dynamic operand "
                                      f"dimension {d} of runtime size 0 (XLA reads padding)",
                                      reads_padding=True)
                continue
            if host_idx is None:
                from .indexing import index_matrix
                cut = np.asarray(arrays.to_host(indices))[tuple(slice(0, m) for m in iss)]
                host_idx = index_matrix(cut, ivd)[0]
            starts = np.clip(host_idx[:, start_map.index(d)], 0, b - 1)
            if starts.size and int(starts.max()) >= n:
                raise unsupported(f"gather reads position {int(starts.max())} of dynamic "
                                  f"operand dimension {d} of runtime size {n} (XLA reads "
                                  f"padding)", reads_padding=True)
        elif slice_sizes[d] == b:
            out[offset_dims[offset_operand.index(d)]] = n
        else:
            raise unsupported(f"gather slice of size {slice_sizes[d]} from dynamic operand "
                              f"dimension {d} of bound {b} (XLA refuses it)")
    return fn(x, indices, **kwargs), check_declared(instr, out, unsupported)


def scatter_step(instr, fn, kwargs, operands, sizes, unsupported, arrays):
    """``scatter`` by XLA's rules (``HandleScatter``; the dynamic padder pads the indices
    with their maximum value, so padded index vectors are out of bounds and skipped):
    only the valid index vectors scatter (the indices' and updates' scatter dimensions
    cut to the indices' runtime sizes); the result has the operands' runtime sizes. An
    update shorter (at runtime) than its index vectors, or a dynamic update window
    dimension not matching a dynamic operand dimension of the same bound and size, is
    refused: XLA would scatter update padding."""
    k = (len(operands) - 1) // 2
    inputs, indices, updates = operands[:k], operands[k], operands[k + 1:]
    in_sizes = merge_sizes("scatter", instr, sizes[:k]) or tuple(inputs[0].shape)
    upd_sizes = merge_sizes("scatter", instr, sizes[k + 1:]) or tuple(updates[0].shape)
    iss = tuple(sizes[k] or indices.shape)
    ivd = int(kwargs["index_vector_dim"])
    uwd = tuple(kwargs["update_window_dims"])
    inserted = tuple(kwargs["inserted_window_dims"])
    ibd = tuple(kwargs.get("input_batching_dims", ()) or ())
    u = updates[0]
    if ivd < indices.ndim and iss[ivd] != indices.shape[ivd]:
        raise unsupported("scatter with a dynamic index vector dimension (XLA refuses it)")
    batch_in = [d for d in range(indices.ndim) if d != ivd]
    scatter_upd = [d for d in range(u.ndim) if d not in uwd]
    icut, ucut = list(indices.shape), list(u.shape)
    for di, du in zip(batch_in, scatter_upd):
        ni, nu = iss[di], upd_sizes[du]
        if nu < ni:
            raise unsupported(f"scatter update dimension {du} has runtime size {nu} below "
                              f"the {ni} valid index vectors (XLA scatters update padding)",
                              reads_padding=True)
        icut[di] = ucut[du] = ni
    window_operand = [d for d in range(inputs[0].ndim) if d not in inserted and d not in ibd]
    for du, od in zip(uwd, window_operand):
        nu = upd_sizes[du]
        if nu == u.shape[du]:
            continue
        if inputs[0].shape[od] != u.shape[du] or in_sizes[od] != nu:
            raise unsupported(f"scatter update window dimension {du} of runtime size {nu} "
                              f"does not match operand dimension {od} (bound "
                              f"{inputs[0].shape[od]}, runtime size {in_sizes[od]}): XLA "
                              f"would scatter update padding into valid elements",
                              reads_padding=True)
    cut_idx = arrays.valid_part(indices, icut)
    cut_upd = [arrays.valid_part(v, ucut) for v in updates]
    value = fn(*inputs, cut_idx, *cut_upd, **kwargs)
    shape = instr.shape
    if isinstance(shape, TupleShape):
        return value, [normal_sizes(in_sizes, leaf.dims) for leaf in shape.elements]
    return value, normal_sizes(in_sizes, shape.dims)
