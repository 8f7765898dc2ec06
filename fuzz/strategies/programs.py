"""The program strategies: ``modules()``, ``instructions(opcode=...)`` and
``computations()``. A module's entry is built by picking opcodes by weight
(``registry.DEFAULT_WEIGHTS``) and running their makers in one ``Builder``; its root
is a tuple of the values nothing else uses, so every instruction is live."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from hloref.ir import Computation, Module
from hloref.shapes import TupleShape

from .builder import BODY_OPS, Builder, Config, ModuleCtx
from .registry import DEFAULT_WEIGHTS, MAKERS, NOT_IN_XLA
from .shapes import shapes, validate_bounds, validate_types


def _build_module(draw, cfg: Config, ops, weights, min_instructions, max_instructions,
                  force_opcode=None) -> Module:
    ctx = ModuleCtx(cfg, makers=MAKERS)
    b = Builder(draw, ctx, entry=True, ops=ops, weights=weights)
    # heaviest first: Hypothesis leans towards small draws, so index 0 is the most common
    names = sorted(ops, key=lambda o: (-float(weights.get(o, DEFAULT_WEIGHTS.get(o, 1.0))), o))
    w = [max(0.0, float(weights.get(o, DEFAULT_WEIGHTS.get(o, 1.0)))) for o in names]
    scale = [int(round(x * 10)) for x in w]
    total = sum(scale)
    if total <= 0:
        raise InvalidArgument("every opcode has weight 0")
    cum = np.cumsum(scale)
    n = draw(st.integers(min_instructions, max_instructions))
    made = 0
    if force_opcode is not None:
        MAKERS[force_opcode](b)
        made = len([i for i in b.instructions if i.opcode != "parameter"])
    while made < n:
        r = draw(st.integers(0, total - 1))
        op = names[int(np.searchsorted(cum, r, side="right"))]
        before = len(b.instructions)
        MAKERS[op](b)
        made += max(1, len(b.instructions) - before)
    if not b.pool:
        b.operand()
    # root: the values nobody uses (keeps every instruction live), or the last one
    if force_opcode is not None:
        forced = [i for i in b.instructions if i.opcode == force_opcode]
        leaves = [forced[-1]] if forced else [b.pool[-1]]
        if isinstance(leaves[0].shape, TupleShape):
            leaves = [leaves[0]]
    else:
        leaves = [v for v in b.instructions if id(v) not in b.used and v.opcode not in
                  ("parameter",) and not (isinstance(v.shape, TupleShape))]
        if not leaves:
            leaves = [b.pool[-1]]
        leaves = leaves[-4:]
    if len(leaves) == 1 and leaves[0].opcode != "parameter":
        root = leaves[0]
    else:
        root = b.add("tuple", leaves, pool=False)
    entry = Computation(ctx.fresh("main"), b.instructions, root, is_entry=True)
    comps = dict(ctx.computations)
    comps[entry.name] = entry
    module = Module(name=f"fuzz_{ctx.counter}", computations=comps, entry_name=entry.name)
    module.fuzz_hints = dict(ctx.hints)
    return module


@st.composite
def _modules(draw, cfg, ops, weights, min_instructions, max_instructions, force_opcode=None):
    if cfg.types is None:
        raise InvalidArgument("no element types")
    n_types = draw(st.integers(1, 3))
    chosen = tuple(draw(st.sampled_from(cfg.types)) for _ in range(n_types))
    sub = Config(**{**cfg.__dict__, "types": tuple(dict.fromkeys(chosen)),
                    "universe": cfg.types})
    return _build_module(draw, sub, ops, weights, min_instructions, max_instructions, force_opcode)


def _check_ops(ops, weights):
    if ops is None:
        ops = [o for o in MAKERS if o not in NOT_IN_XLA]
    ops = list(ops)
    if not ops:
        raise InvalidArgument("ops must not be empty")
    bad = [o for o in ops if o not in MAKERS]
    if bad:
        raise InvalidArgument(f"the generator cannot produce {', '.join(bad)}; known opcodes: "
                              f"{', '.join(sorted(MAKERS))}")
    weights = dict(weights or {})
    for k, v in weights.items():
        if k not in MAKERS:
            raise InvalidArgument(f"weights: unknown opcode {k!r}")
        if not isinstance(v, (int, float)) or v < 0:
            raise InvalidArgument(f"weights[{k!r}]={v!r} must be a number >= 0")
    if all(weights.get(o, DEFAULT_WEIGHTS.get(o, 1.0)) == 0 for o in ops):
        raise InvalidArgument("every selected opcode has weight 0")
    return ops, weights


def modules(*, ops=None, weights=None, element_types=None, min_instructions: int = 1,
            max_instructions: int = 12, max_elements: int = 64, max_dim: int = 5,
            max_rank: int = 3, max_trip_count: int = 4, max_depth: int = 2,
            layouts: bool = True, zero_size: bool = True) -> st.SearchStrategy[Module]:
    """Whole HLO modules (``hloref.ir.Module``), valid by construction.

    ``ops``: the opcodes the generator picks (default: all of ``GENERATABLE_OPCODES``;
    glue ops are used regardless); ``weights``: opcode → relative weight;
    ``element_types``: type names the program may use (default ``ORACLE_ELEMENT_TYPES``);
    ``min/max_instructions``: picks of top-level ops (glue and nested computations
    add more instructions); ``max_elements``/``max_dim``/``max_rank``: value sizes;
    ``max_trip_count``: bound of while loops; ``max_depth``: nesting of called
    computations. The module has ``fuzz_hints`` for ``inputs_for``."""
    ops, weights = _check_ops(ops, weights)
    types = validate_types(element_types)
    validate_bounds("instructions", min_instructions, max_instructions, minimum=1)
    if max_instructions > 200:
        raise InvalidArgument(f"max_instructions={max_instructions} must be <= 200")
    validate_bounds("elements", 1, max_elements, minimum=1)
    validate_bounds("dim", 1, max_dim, minimum=1)
    validate_bounds("rank", 0, max_rank)
    if max_rank > 5:
        raise InvalidArgument(f"max_rank={max_rank} must be <= 5")
    validate_bounds("trip_count", 0, max_trip_count)
    validate_bounds("depth", 0, max_depth)
    cfg = Config(types=types, max_elements=max_elements, max_dim=max_dim, max_rank=max_rank,
                  layouts=layouts, zero_size=zero_size, max_trip_count=max_trip_count,
                  max_depth=max_depth)
    return _modules(cfg, ops, weights, min_instructions, max_instructions)


def instructions(*, opcode: str | None = None, element_types=None,
                 max_elements: int = 64) -> st.SearchStrategy[Module]:
    """A module whose root is one instruction of ``opcode`` (drawn when ``None``) on
    parameters, constants and the glue it needs."""
    if opcode is not None and opcode not in MAKERS:
        raise InvalidArgument(f"the generator cannot produce {opcode!r}; known opcodes: "
                              f"{', '.join(sorted(MAKERS))}")
    types = validate_types(element_types)
    validate_bounds("elements", 1, max_elements, minimum=1)
    cfg = Config(types=types, max_elements=max_elements, max_depth=1)

    @st.composite
    def one(draw):
        op = opcode or draw(st.sampled_from(sorted(MAKERS)))
        return draw(_modules(cfg, [op], {}, 1, 1, force_opcode=op))
    return one()


def computations(*, element_types=None, min_parameters: int = 1, max_parameters: int = 3,
                 max_instructions: int = 6) -> st.SearchStrategy[Computation]:
    """A standalone ``Computation`` (no calls): parameters of drawn shapes and a body of
    elementwise and shape ops. To run it, put it in a module as the entry."""
    types = validate_types(element_types)
    validate_bounds("parameters", min_parameters, max_parameters)
    validate_bounds("instructions", 1, max_instructions, minimum=1)

    @st.composite
    def comp(draw):
        cfg = Config(types=types, max_depth=0)
        ctx = ModuleCtx(cfg, makers=MAKERS)
        n = draw(st.integers(min_parameters, max_parameters))
        params = [draw(shapes(element_types=types, layouts=False)) for _ in range(n)]
        b = Builder(draw, ctx, param_shapes=params, fixed=True)
        body = [o for o in BODY_OPS if o not in ("reduce", "sort")]
        for _ in range(draw(st.integers(1, max_instructions))):
            MAKERS[draw(st.sampled_from(body))](b)
        root = b.instructions[-1]
        if root.opcode == "parameter" or isinstance(root.shape, TupleShape):
            root = b.add("copy", [b.pool[-1]])
        return Computation(ctx.fresh("comp"), b.instructions, root)
    return comp()
