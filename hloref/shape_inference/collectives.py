"""Shape rules of the collectives: all-reduce, all-gather, reduce-scatter, all-to-all,
collective-permute/-broadcast/-reduce, shuffle, replica-id, partition-id."""

from __future__ import annotations

from ..shapes import ArrayShape, Shape, TupleShape
from ..types import S32, U32
from .common import (ShapeError, as_array, check_dims_in_range, infer, int_list, make_array,
                     program_shape, required, shape_str, tuple_or_single)
from .reduce import check_reducer
from .shape_ops import infer_copy


def group_size(replica_groups) -> int | None:
    groups = getattr(replica_groups, "groups", None)
    if groups:
        return len(groups[0])
    return None


@infer("all-reduce")
def infer_all_reduce(*operands: Shape, to_apply=None, **_):
    """``all-reduce``: operand shapes (tuple when > 1 operand). As XLA's
    ``InferAllReduceShape`` (and ``HandleAllReduce``), the reducer's signature is not
    checked: XLA:CPU matches the reduction kind from it and reduces in the operand type."""
    arrs = [as_array(o, f"all-reduce operand {i}") for i, o in enumerate(operands)]
    if not arrs:
        raise ShapeError("all-reduce: expects at least one operand")
    required(to_apply, "to_apply")
    return tuple_or_single([make_array(a.element_type, a.dims) for a in arrs])


def _gather_scatter_dim(op, operands, dimensions, shard_count, replica_groups, multiply):
    arrs = [as_array(o, f"{op} operand {i}") for i, o in enumerate(operands)]
    if not arrs:
        raise ShapeError(f"{op}: expects at least one operand")
    dims = int_list(required(dimensions, "dimensions"), "dimensions")
    if len(dims) != 1:
        raise ShapeError(f"{op}: dimensions must have one entry, got {list(dims)}")
    d = dims[0]
    n = shard_count if shard_count is not None else group_size(replica_groups)
    if n is None:
        raise ShapeError(f"{op}: shard_count unknown (no explicit replica_groups)")
    out = []
    for a in arrs:
        if not 0 <= d < a.rank:
            raise ShapeError(f"{op}: dimension {d} out of range [0, {a.rank})")
        dd = list(a.dims)
        if multiply:
            dd[d] *= n
        else:
            if dd[d] % n:
                raise ShapeError(f"{op}: dimension {d} of size {dd[d]} is not divisible by the "
                                 f"shard count {n}")
            dd[d] //= n
        out.append(make_array(a.element_type, dd))
    return tuple_or_single(out)


@infer("all-gather")
def infer_all_gather(*operands: Shape, dimensions=None, shard_count=None, replica_groups=None, **_):
    """``all-gather``: dimension ``d`` multiplied by the shard count."""
    return _gather_scatter_dim("all-gather", operands, dimensions, shard_count, replica_groups, True)


@infer("reduce-scatter")
def infer_reduce_scatter(*operands: Shape, dimensions=None, shard_count=None, replica_groups=None,
                         to_apply=None, **_):
    """``reduce-scatter``: dimension ``d`` divided by the shard count."""
    required(to_apply, "to_apply")
    return _gather_scatter_dim("reduce-scatter", operands, dimensions, shard_count, replica_groups,
                               False)


@infer("all-to-all")
def infer_all_to_all(*operands: Shape, dimensions=None, replica_groups=None, **_):
    """``all-to-all``: the array form (``dimensions={split}``) keeps the shape; the
    tuple form returns the tuple of operand shapes."""
    arrs = [as_array(o, f"all-to-all operand {i}") for i, o in enumerate(operands)]
    if not arrs:
        raise ShapeError("all-to-all: expects at least one operand")
    if dimensions is not None:
        dims = int_list(dimensions, "dimensions")
        if len(dims) != 1 or len(arrs) != 1:
            raise ShapeError("all-to-all: the array form takes one operand and one split dimension")
        check_dims_in_range(dims, arrs[0].rank, "all-to-all dimensions")
        n = group_size(replica_groups)
        if n and arrs[0].dims[dims[0]] % n:
            raise ShapeError(f"all-to-all: split dimension size {arrs[0].dims[dims[0]]} is not "
                             f"divisible by the group size {n}")
        return arrs[0]
    return TupleShape(tuple(make_array(a.element_type, a.dims) for a in arrs))


@infer("collective-permute")
def infer_collective_permute(*operands: Shape, source_target_pairs=None, slice_sizes=None, **_):
    """``collective-permute`` (XLA's ``InferCollectivePermuteShape``): the operand's
    shape, or the tuple of the operands' shapes for a combined permute of several
    arrays; with ``slice_sizes`` the in-place form (operand, output, input_start,
    output_start) returns the output's shape."""
    if slice_sizes is not None:
        if len(operands) != 4:
            raise ShapeError(f"collective-permute: the in-place form (slice_sizes) takes 4 "
                             f"operands, got {len(operands)}")
        return operands[1]
    if not operands:
        raise ShapeError("collective-permute: expects at least one operand")
    arrs = [as_array(o, f"collective-permute operand {i}") for i, o in enumerate(operands)]
    return tuple_or_single(arrs)


infer_collective_broadcast = infer("collective-broadcast")(infer_copy)


@infer("collective-reduce")
def infer_collective_reduce(*operands: Shape, to_apply=None, has_dynamic_root=None, **_):
    """``collective-reduce``: the shapes of the reduced operands, as ``all-reduce``; with
    ``has_dynamic_root=true`` the last operand is the s32 array of root ranks (one per
    reduced operand) and is not part of the result (upstream
    ``collective_reduce_thunk.cc``)."""
    data = list(operands)
    if has_dynamic_root is True:
        if len(data) < 2:
            raise ShapeError("collective-reduce: has_dynamic_root=true needs the reduced "
                             "operands and a trailing s32 root operand")
        root = as_array(data.pop(), "collective-reduce root operand")
        if root.element_type != S32:
            raise ShapeError(f"collective-reduce: the root operand must be s32, got "
                             f"{shape_str(root)}")
    try:
        result = infer_all_reduce(*data, to_apply=to_apply)
    except ShapeError as exc:
        raise ShapeError(str(exc).replace("all-reduce", "collective-reduce")) from None
    prog = program_shape(to_apply)
    for a in data:
        check_reducer(prog, [make_array(a.element_type, ())], [a], "collective-reduce")
    return result


def _permute_indices_shape(operand: ArrayShape, dims: tuple[int, ...], indices) -> None:
    """``indices`` hold, for every element of the result, the coordinates (along
    ``dims``, in that order) of the operand element it takes: dims of the operand
    (or 1, shared along that dimension) plus a trailing dimension of ``len(dims)``
    coordinates, which may be left out when one dimension is shuffled
    (``shuffle_expander.cc``, ``MakeShuffleStartIndices``)."""
    shape = getattr(indices, "shape", None)
    if not isinstance(shape, ArrayShape):
        raise ShapeError("shuffle: mode=permute needs indices=<integer array literal>")
    if not shape.element_type.is_integer:
        raise ShapeError(f"shuffle: indices must be integers, got {shape_str(shape)}")
    lead = shape.dims
    if shape.rank == operand.rank + 1:
        if shape.dims[-1] != len(dims):
            raise ShapeError(f"shuffle: the last dimension of indices {shape_str(shape)} must hold "
                             f"{len(dims)} coordinates (one per shuffled dimension)")
        lead = shape.dims[:-1]
    elif not (shape.rank == operand.rank and len(dims) == 1):
        raise ShapeError(f"shuffle: indices {shape_str(shape)} must have rank "
                         f"{operand.rank + 1} (operand rank + 1)"
                         + (f" or {operand.rank}" if len(dims) == 1 else ""))
    for d, (i, o) in enumerate(zip(lead, operand.dims)):
        if i not in (o, 1):
            raise ShapeError(f"shuffle: dimension {d} of indices {shape_str(shape)} is {i}; it "
                             f"must be the operand's {o} or 1")


@infer("shuffle")
def infer_shuffle(operand: Shape, *, dimensions=None, mode=None, shifts=None, indices=None,
                  **_):
    """``shuffle``: the operand's shape; ``dimensions`` are the shuffled dimensions;
    ``mode=rotate`` takes one shift per dimension, ``mode=permute`` an indices literal.
    Other modes (upstream also declares multi-rotate) are accepted unchecked."""
    a = as_array(operand, "shuffle operand")
    dims = int_list(required(dimensions, "dimensions"), "dimensions")
    check_dims_in_range(dims, a.rank, "dimensions")
    mode = str(required(mode, "mode"))
    if mode == "rotate":
        n = len(int_list(required(shifts, "shifts"), "shifts"))
        if n != len(dims):
            raise ShapeError(f"shuffle: mode=rotate takes one shift per dimension: "
                             f"{len(dims)} dimensions, {n} shifts")
    elif mode == "permute":
        _permute_indices_shape(a, dims, required(indices, "indices"))
    return a


@infer("replica-id", "partition-id")
def infer_replica_id(**_):
    """``replica-id``: u32[]."""
    return make_array(U32, ())


infer_partition_id = infer_replica_id
