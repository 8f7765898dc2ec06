"""Shape rules of gather and scatter (with batching dimensions)."""

from __future__ import annotations

from ..shapes import ArrayShape, Shape
from .common import (ShapeError, as_array, check_dims_in_range, infer, int_list, make_array,
                     program_shape, required, tuple_or_single)
from .reduce import check_reducer


def _expanded_indices(idx: ArrayShape, ivd: int, op: str) -> list[int]:
    if not idx.element_type.is_integer:
        raise ShapeError(f"{op}: indices must be integers, got {idx.element_type.name}")
    if not 0 <= ivd <= idx.rank:
        raise ShapeError(f"{op}: index_vector_dim={ivd} out of range [0, {idx.rank}]")
    dims = list(idx.dims)
    if ivd == idx.rank:
        dims.append(1)
    return dims


def interleave_dims(positions, window, batch) -> tuple[int, ...]:
    """Dims of rank ``len(window) + len(batch)``: the window sizes at ``positions``
    (sorted), the batch sizes elsewhere, each in order (a gather's result, a scatter's
    updates)."""
    out, wi, bi = [], 0, 0
    for i in range(len(window) + len(batch)):
        if i in positions:
            out.append(window[wi])
            wi += 1
        else:
            out.append(batch[bi])
            bi += 1
    return tuple(out)


@infer("gather")
def infer_gather(operand: Shape, start_indices: Shape, *, offset_dims=None,
                 collapsed_slice_dims=None, start_index_map=None, index_vector_dim=None,
                 slice_sizes=None, operand_batching_dims=(), start_indices_batching_dims=(),
                 indices_are_sorted=None, **_):
    """``gather`` (with batching dims): result = offset dims at ``offset_dims``, batch
    dims of the indices (without ``index_vector_dim``) elsewhere."""
    a = as_array(operand, "gather operand")
    idx = as_array(start_indices, "gather start indices")
    offset = int_list(required(offset_dims, "offset_dims"), "offset_dims")
    collapsed = int_list(required(collapsed_slice_dims, "collapsed_slice_dims"), "collapsed_slice_dims")
    sim = int_list(required(start_index_map, "start_index_map"), "start_index_map")
    ivd = int(required(index_vector_dim, "index_vector_dim"))
    sizes = int_list(required(slice_sizes, "slice_sizes"), "slice_sizes")
    obd = int_list(operand_batching_dims, "operand_batching_dims")
    sibd = int_list(start_indices_batching_dims, "start_indices_batching_dims")
    exp = _expanded_indices(idx, ivd, "gather")
    batch = [d for i, d in enumerate(exp) if i != ivd]
    out_rank = len(offset) + len(batch)
    check_dims_in_range(offset, out_rank, "gather offset_dims", sorted_=True)
    check_dims_in_range(collapsed, a.rank, "gather collapsed_slice_dims", sorted_=True)
    check_dims_in_range(obd, a.rank, "gather operand_batching_dims", sorted_=True)
    check_dims_in_range(sim, a.rank, "gather start_index_map")
    check_dims_in_range(sibd, len(exp), "gather start_indices_batching_dims")
    if ivd in sibd:
        raise ShapeError("gather: start_indices_batching_dims must not contain index_vector_dim")
    if set(collapsed) & set(obd):
        raise ShapeError("gather: collapsed_slice_dims and operand_batching_dims overlap")
    if len(obd) != len(sibd):
        raise ShapeError(f"gather: operand_batching_dims ({len(obd)}) and "
                         f"start_indices_batching_dims ({len(sibd)}) differ in length")
    if len(sim) != exp[ivd]:
        raise ShapeError(f"gather: start_index_map has {len(sim)} entries but the index vector "
                         f"dimension has size {exp[ivd]}")
    if len(sizes) != a.rank:
        raise ShapeError(f"gather: slice_sizes has {len(sizes)} entries, operand rank is {a.rank}")
    if len(offset) + len(collapsed) + len(obd) != a.rank:
        raise ShapeError(f"gather: offset_dims ({len(offset)}) + collapsed_slice_dims "
                         f"({len(collapsed)}) + operand_batching_dims ({len(obd)}) must equal the "
                         f"operand rank {a.rank}")
    for i, (s, d) in enumerate(zip(sizes, a.dims)):
        if not 0 <= s <= d:
            raise ShapeError(f"gather: slice_sizes[{i}]={s} not within [0, {d}]")
    for d in collapsed + obd:
        if sizes[d] > 1:
            raise ShapeError(f"gather: slice_sizes[{d}]={sizes[d]} must be <= 1 for a collapsed or "
                             "batching dimension")
    offset_sizes = [s for i, s in enumerate(sizes) if i not in collapsed and i not in obd]
    return make_array(a.element_type, interleave_dims(offset, offset_sizes, batch))


@infer("scatter")
def infer_scatter(*operands: Shape, update_window_dims=None, inserted_window_dims=None,
                  scatter_dims_to_operand_dims=None, index_vector_dim=None, to_apply=None,
                  input_batching_dims=(), scatter_indices_batching_dims=(),
                  indices_are_sorted=None, unique_indices=None, **_):
    """``scatter(operands..., indices, updates...)``: result = the operands' shapes."""
    if len(operands) < 3 or len(operands) % 2 == 0:
        raise ShapeError(f"scatter: expects N operands, indices and N updates (an odd count >= 3), "
                         f"got {len(operands)}")
    n = (len(operands) - 1) // 2
    ops = [as_array(o, f"scatter operand {i}") for i, o in enumerate(operands[:n])]
    idx = as_array(operands[n], "scatter indices")
    ups = [as_array(o, f"scatter update {i}") for i, o in enumerate(operands[n + 1:])]
    uwd = int_list(required(update_window_dims, "update_window_dims"), "update_window_dims")
    iwd = int_list(required(inserted_window_dims, "inserted_window_dims"), "inserted_window_dims")
    sdod = int_list(required(scatter_dims_to_operand_dims, "scatter_dims_to_operand_dims"),
                 "scatter_dims_to_operand_dims")
    ivd = int(required(index_vector_dim, "index_vector_dim"))
    ibd = int_list(input_batching_dims, "input_batching_dims")
    sibd = int_list(scatter_indices_batching_dims, "scatter_indices_batching_dims")
    a = ops[0]
    for i, o in enumerate(ops):
        if o.dims != a.dims:
            raise ShapeError(f"scatter: operand {i} dims {list(o.dims)} differ from operand 0 "
                             f"{list(a.dims)}")
    exp = _expanded_indices(idx, ivd, "scatter")
    scatter_batch = [d for i, d in enumerate(exp) if i != ivd]
    for i, u in enumerate(ups):
        if u.dims != ups[0].dims:
            raise ShapeError(f"scatter: update {i} dims differ from update 0")
        if u.element_type != ops[i].element_type:
            raise ShapeError(f"scatter: update {i} type {u.element_type.name} differs from operand "
                             f"{i} type {ops[i].element_type.name}")
    u = ups[0]
    if u.rank != len(uwd) + len(scatter_batch):
        raise ShapeError(f"scatter: updates rank {u.rank} must equal len(update_window_dims) "
                         f"{len(uwd)} + scatter batch rank {len(scatter_batch)}")
    check_dims_in_range(uwd, u.rank, "scatter update_window_dims", sorted_=True)
    check_dims_in_range(iwd, a.rank, "scatter inserted_window_dims", sorted_=True)
    check_dims_in_range(ibd, a.rank, "scatter input_batching_dims", sorted_=True)
    check_dims_in_range(sdod, a.rank, "scatter scatter_dims_to_operand_dims")
    check_dims_in_range(sibd, len(exp), "scatter scatter_indices_batching_dims")
    if set(iwd) & set(ibd):
        raise ShapeError("scatter: inserted_window_dims and input_batching_dims overlap")
    if len(ibd) != len(sibd):
        raise ShapeError("scatter: input_batching_dims and scatter_indices_batching_dims differ in "
                         "length")
    if len(sdod) != exp[ivd]:
        raise ShapeError(f"scatter: scatter_dims_to_operand_dims has {len(sdod)} entries but the "
                         f"index vector dimension has size {exp[ivd]}")
    if len(uwd) + len(iwd) + len(ibd) != a.rank:
        raise ShapeError(f"scatter: update_window_dims ({len(uwd)}) + inserted_window_dims "
                         f"({len(iwd)}) + input_batching_dims ({len(ibd)}) must equal the operand "
                         f"rank {a.rank}")
    window_operand_dims = [i for i in range(a.rank) if i not in iwd and i not in ibd]
    for k, ud in enumerate(uwd):
        od = window_operand_dims[k]
        if u.dims[ud] > a.dims[od]:
            raise ShapeError(f"scatter: update window dimension {ud} ({u.dims[ud]}) exceeds operand "
                             f"dimension {od} ({a.dims[od]})")
    ubatch = [d for i, d in enumerate(u.dims) if i not in uwd]
    if ubatch != scatter_batch:
        raise ShapeError(f"scatter: update scatter dims {ubatch} must equal the indices' batch dims "
                         f"{scatter_batch}")
    prog = program_shape(required(to_apply, "to_apply"))
    inits = [make_array(o.element_type, ()) for o in ops]
    check_reducer(prog, inits, ops, "scatter")
    return tuple_or_single([make_array(o.element_type, o.dims) for o in ops])
