"""Multi-device JAX computations whose device code is written by hand: ``shard_map``
(and ``pmap``, which jax 0.10.2 lowers the same way), on N devices.

jax lowers them (Shardy) to a global-view entry computation::

    p = f32[8,2] parameter(0)
    l = f32[2,2] custom-call(p), custom_call_target="xla.sdy.GlobalToLocalShape",
                                 frontend_attributes={xla.sdy.in_shardings=...}
    b = f32[2,2] call(l), to_apply=xla.sdy.manual_computation_body
    g = f32[8,2] custom-call(b), custom_call_target="xla.sdy.LocalToGlobalShape", ...

``evaluate_manual(module, inputs)`` evaluates that entry in global view: each
``GlobalToLocalShape`` splits its global operand into the N per-device blocks its
sharding names (mesh axes, major to minor, device d = row-major mesh coordinates,
as jax's device assignment for a mesh is), the manual body runs on N simulated
devices (``num_partitions = N``: hloref's collectives), ``LocalToGlobalShape``
assembles the blocks again, and any other global instruction is evaluated by hloref
alone on its global operands. A mesh with an explicit device order, sub-axes, or a
body that is only partly manual is refused (``HloUnsupportedError``).
"""

from __future__ import annotations

import itertools
import re

import numpy as np

__all__ = ["is_manual", "evaluate_manual", "mesh_of"]

_G2L = "xla.sdy.GlobalToLocalShape"
_L2G = "xla.sdy.LocalToGlobalShape"
_IDENTITY = frozenset({"xla.sdy.FuncResultSharding", "Sharding"})


def _unsupported(reason: str):
    from .errors import HloUnsupportedError
    return HloUnsupportedError("custom-call", "cpu", reason)


def is_manual(module) -> bool:
    return any(i.opcode == "custom-call" and i.attrs.get("custom_call_target") == _G2L
               for i in module.entry.instructions)


def mesh_of(module) -> dict[str, list[tuple[str, int]]]:
    """The Shardy meshes of the module header: name -> [(axis, size), ...]."""
    fa = str(module.attrs.get("frontend_attributes", "")).replace('\\"', '"')
    meshes = {}
    for name, body in re.findall(r"(\w+)\s*=\s*#sdy\.mesh<\[(.*?)\]", fa):
        meshes[name] = [(a, int(n)) for a, n in re.findall(r'"(\w+)"\s*=\s*(\d+)', body)]
    if "device_ids" in fa:
        raise _unsupported("a Shardy mesh with an explicit device order")
    return meshes


def _shardings(instr, key: str) -> list[tuple[str, list[list[str]]]]:
    """``[(mesh name, [[axes of dim 0], [axes of dim 1], ...]), ...]`` per value."""
    fa = str(instr.attrs.get("frontend_attributes", "")).replace('\\"', '"')
    m = re.search(key + r'="#sdy\.sharding_per_value<\[(.*)\]>"', fa)
    if not m:
        raise _unsupported(f"{instr.name}: no {key}")
    out = []
    for mesh, dims in re.findall(r"<@(\w+),\s*\[(.*?)\](?:,[^>]*)?>", m.group(1)):
        per_dim = []
        for d in re.findall(r"\{([^}]*)\}", dims):
            if ":" in d or "?" in d:
                raise _unsupported(f"{instr.name}: sub-axes or open dimensions in {d!r}")
            per_dim.append(re.findall(r'"(\w+)"', d))
        out.append((mesh, per_dim))
    return out


def _manual_axes(instr) -> list[str]:
    fa = str(instr.attrs.get("frontend_attributes", "")).replace('\\"', '"')
    m = re.search(r"manual_axes\{(.*?)\}", fa)
    return re.findall(r'"(\w+)"', m.group(1)) if m else []


def _coords(axes: list[tuple[str, int]]) -> list[dict[str, int]]:
    """Mesh coordinates of each device, row-major over the axes (device order)."""
    return [dict(zip([a for a, _ in axes], c))
            for c in itertools.product(*[range(n) for _, n in axes])]


def _block(coord: dict, sizes: dict, dim_axes: list[str]) -> tuple[int, int]:
    """(index of this device's block, number of blocks) along one dimension."""
    index, count = 0, 1
    for a in dim_axes:
        index = index * sizes[a] + coord[a]
        count *= sizes[a]
    return index, count


def _split(value: np.ndarray, spec: list[list[str]], axes, devices) -> list:
    sizes = dict(axes)
    out = []
    for coord in devices:
        idx = []
        for dim, dim_axes in enumerate(spec):
            i, n = _block(coord, sizes, dim_axes)
            step = value.shape[dim] // n
            idx.append(slice(i * step, (i + 1) * step))
        out.append(np.array(value[tuple(idx)], order="C"))  # keeps a 0-d block 0-d
    return out


def _assemble(blocks: list, spec: list[list[str]], axes, devices) -> np.ndarray:
    sizes = dict(axes)
    first = blocks[0]
    shape = [first.shape[dim] * _block(devices[0], sizes, dim_axes)[1]
             for dim, dim_axes in enumerate(spec)]
    out = np.empty(shape, dtype=first.dtype)
    for coord, block in zip(devices, blocks):
        idx = []
        for dim, dim_axes in enumerate(spec):
            i, _ = _block(coord, sizes, dim_axes)
            step = block.shape[dim]
            idx.append(slice(i * step, (i + 1) * step))
        out[tuple(idx)] = block  # devices that hold the same block hold the same value
    return out


class _PerDevice(list):
    """One value per device."""


def evaluate_manual(module, inputs: list, *, limits=None, hooks=None):
    """The global value of a shard_map module on global ``inputs`` (see the module doc).
    ``hooks`` (``hloref.fuzz.sampling.RunHooks``): one run of the numerical envelope;
    every interpreter started here (one per device, one per global-view instruction)
    gets its perturbation hook."""

    def options(sub, key):
        if hooks is None:
            return None
        return lambda d: hooks.interpreter_options(sub, f"{key}/{d}")

    import dataclasses

    import hloref
    from hloref.evaluator.interpreter import topological_order
    from hloref.fuzz.differential import isolated_module
    from hloref.ir import Module
    from hloref.shapes import TupleShape
    meshes = mesh_of(module)
    if len(meshes) != 1:
        raise _unsupported(f"{len(meshes)} Shardy meshes")
    (mesh_name, axes), = meshes.items()
    devices = _coords(axes)
    n = len(devices)
    entry = module.entry
    values: dict = {}
    params = entry.parameters
    for p, v in zip(params, inputs):
        values[p.name] = v
    for instr in topological_order(entry):
        if instr.opcode == "parameter":
            continue
        ops = [values[o.name] for o in instr.operands]
        target = instr.attrs.get("custom_call_target") if instr.opcode == "custom-call" else None
        per_device = any(isinstance(o, _PerDevice) for o in ops)
        if target == _G2L:
            if set(_manual_axes(instr)) != {a for a, _ in axes}:
                raise _unsupported("a shard_map that is manual over only some mesh axes")
            specs = _shardings(instr, "xla.sdy.in_shardings")
            splits = [_split(np.asarray(v), spec, axes, devices)
                      for v, (_, spec) in zip(ops, specs)]
            if len(splits) == 1:
                values[instr.name] = _PerDevice(splits[0])
            else:
                values[instr.name] = _PerDevice(tuple(s[d] for s in splits) for d in range(n))
        elif target == _L2G:
            specs = _shardings(instr, "xla.sdy.out_shardings")
            if len(ops) == 1:
                values[instr.name] = _assemble(list(ops[0]), specs[0][1], axes, devices)
            else:
                values[instr.name] = tuple(_assemble(list(o), s, axes, devices)
                                           for o, (_, s) in zip(ops, specs))
        elif target in _IDENTITY and len(ops) == 1:
            values[instr.name] = ops[0]
        elif instr.opcode == "call" and per_device:
            body = str(instr.attrs.get("to_apply"))
            sub = Module(name=f"{module.name}_manual", computations=dict(module.computations),
                         entry_name=body, attrs={"num_partitions": n, "replica_count": 1})
            args = [list(o) if isinstance(o, _PerDevice) else [o] * n for o in ops]
            values[instr.name] = _PerDevice(hloref.evaluate(
                sub, *args, limits=limits, interpreter_options=options(sub, instr.name)))
        elif instr.opcode == "get-tuple-element" and per_device:
            values[instr.name] = _PerDevice(v[instr.attrs["index"]] for v in ops[0])
        elif per_device:
            raise _unsupported(f"{instr.name} ({instr.opcode}) on per-device values outside "
                               "the manual computation")
        elif instr.opcode == "tuple":
            values[instr.name] = tuple(ops)
        elif instr.opcode == "get-tuple-element":
            values[instr.name] = ops[0][instr.attrs["index"]]
        else:  # an instruction in global view: hloref on its global operands
            iso = isolated_module(module, dataclasses.replace(instr))
            values[instr.name] = hloref.evaluate(iso, *ops, limits=limits,
                                                 interpreter_options=options(iso, instr.name))
    result = values[entry.root.name]
    if isinstance(result, _PerDevice):
        raise _unsupported("the entry returns per-device values")
    if isinstance(entry.root.shape, TupleShape) and not isinstance(result, tuple):
        result = tuple(result)
    return result
