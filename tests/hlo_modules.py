"""HLO module texts the tests share, and the builders that write the parts they repeat.

A test that needs a module another file also runs takes it from ``MODULES`` by name; a
test whose module differs from others only in a few parameters builds it here. Every
builder returns plain HLO lines (two-space indented) or whole computations, with the
instruction names the tests' by-hand checks speak of, and no ``%``: callers may still
fill ``%`` templates around them.

- ``parameters``: the ``parameter(i)`` lines of a computation.
- ``scalar_computation``: a reducer, combiner or comparator of two scalars.
- ``state_read``: a site of rng-get-and-update-state and one of its two 64-bit words.
- ``state_bracket``: the ENTRY of the rng-state tests, which reads the state before and
  after the op under test and returns both reads with the op's result.
- ``random_bit_compare``: a comparator (sort, select-and-scatter's select) answering
  the low bit of the state it reads.
- ``counted_loop``: the ``cond``/``step`` computations of a while loop over ``(i, n)``
  that runs ``n`` times.
- ``scalar_effect_computation``: a two-scalar computation (reducer, comparator,
  combiner) with an effect its root does not read; ``outfeed_computation`` (it outfeeds
  what each call saw) and ``dead_site_computation`` (an unread rng-state site).
- ``scatter_entry``: the ENTRY of a scatter of scalar updates into a vector.

Multi-device modules live in ``collective_modules.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["MODULES", "counted_loop", "dead_site_computation", "outfeed_computation",
           "parameters", "random_bit_compare", "scalar_computation", "scalar_effect_computation",
           "scatter_entry", "state_bracket", "state_read"]


def parameters(*decls: str) -> str:
    """``"name = shape"`` declarations as the lines ``name = shape parameter(i)``."""
    return "".join(f"  {d} parameter({i})\n" for i, d in enumerate(decls))


def scalar_computation(name: str, t: str, opcode: str, attrs: str = "", *,
                       out: str | None = None) -> str:
    """A computation ``name`` of two ``t`` scalars ``a``, ``b`` whose root ``s`` is
    ``opcode(a, b)`` with ``attrs`` (a reducer, combiner or, with ``out="pred"`` and a
    direction, a comparator)."""
    a = f", {attrs}" if attrs else ""
    return (f"{name} {{\n{parameters(f'a = {t}[]', f'b = {t}[]')}"
            f"  ROOT s = {out or t}[] {opcode}(a, b){a}\n}}\n")


def state_read(delta, *, word: int = 0, names: Sequence[str] = ("s", "lo", "l")) -> str:
    """Three lines: ``names[0]`` = an rng-get-and-update-state of ``delta`` (the state
    before the call), ``names[2]`` = its low (``word=0``) or high (``word=1``) word, through
    the one-element slice ``names[1]``."""
    s, piece, value = names
    return (f"  {s} = u64[2] rng-get-and-update-state(), delta={delta}\n"
            f"  {piece} = u64[1] slice({s}), slice={{[{word}:{word + 1}]}}\n"
            f"  {value} = u64[] reshape({piece})\n")


def state_bracket(head: str, op: str, middle: Sequence[tuple[str, str]], *, before=100,
                  after=100, tail: str = "") -> str:
    """The ENTRY computation ``e``: ``head`` (parameters, constants), ``a`` (a state read
    of delta ``before``), the ``op`` lines, ``b`` (a state read of delta ``after``), the
    ``tail`` lines, and the root ``t``: the state words before, the ``middle`` values
    (``(name, shape)`` pairs), the state words after, concatenated when every middle
    value is a ``u64[n]`` vector, else a tuple."""
    site = "u64[2] rng-get-and-update-state(), delta="
    names = ", ".join(["a"] + [n for n, _ in middle] + ["b"])
    vectors = [s[len("u64["):-1] for _, s in middle if s.startswith("u64[") and "," not in s]
    if len(vectors) == len(middle) and all(v.isdigit() for v in vectors):
        size = 4 + sum(int(v) for v in vectors)
        root = f"  ROOT t = u64[{size}] concatenate({names}), dimensions={{0}}\n"
    else:
        shapes = ", ".join(["u64[2]"] + [s for _, s in middle] + ["u64[2]"])
        root = f"  ROOT t = ({shapes}) tuple({names})\n"
    return (f"ENTRY e {{\n{head}  a = {site}{before}\n{op}  b = {site}{after}\n{tail}"
            f"{root}}}\n")


def random_bit_compare(name: str, params: Sequence[str], delta) -> str:
    """A computation ``name`` over ``params`` (``"name = shape"``) answering whether the
    low word of the state it reads (a site of ``delta``) is even."""
    return (f"{name} {{\n{parameters(*params)}{state_read(delta)}"
            "  one = u64[] constant(1)\n"
            "  bit = u64[] and(l, one)\n"
            "  z = u64[] constant(0)\n"
            "  ROOT p = pred[] compare(bit, z), direction=EQ\n}\n")


def counted_loop(site: str = "", *, t: str = "u64") -> str:
    """Computations ``cond`` and ``step`` of a while loop over ``(i, n)`` (scalars of type
    ``t``) that runs ``n`` times from ``i = 0``; ``site``: lines ``step`` evaluates each
    iteration before counting (an unused rng-get-and-update-state, an outfeed of ``i``)."""
    state = f"  st = ({t}[], {t}[]) parameter(0)\n"
    fields = (f"  i = {t}[] get-tuple-element(st), index=0\n"
              f"  n = {t}[] get-tuple-element(st), index=1\n")
    return (f"cond {{\n{state}{fields}  ROOT lt = pred[] compare(i, n), direction=LT\n}}\n"
            f"step {{\n{state}{fields}{site}  one = {t}[] constant(1)\n"
            f"  j = {t}[] add(i, one)\n"
            f"  ROOT r = ({t}[], {t}[]) tuple(j, n)\n}}\n")


def scalar_effect_computation(name: str, t: str, lines: str, root: str, *,
                              params: Sequence[str] = ("a", "b")) -> str:
    """A computation ``name`` of two ``t`` scalars (``params``) evaluating ``lines`` (an
    effect its root does not read: a dead rng-get-and-update-state site, an outfeed)
    beside its ``root`` line."""
    return (f"{name} {{\n{parameters(*(f'{p} = {t}[]' for p in params))}{lines}"
            f"  {root}\n}}\n")


def dead_site_computation(name: str, t: str, delta, root: str) -> str:
    """``scalar_effect_computation`` whose effect is a site ``s`` of delta ``delta``
    nothing reads (evaluated for the state it advances)."""
    return scalar_effect_computation(
        name, t, f"  s = u64[2] rng-get-and-update-state(), delta={delta}\n", root)


def outfeed_computation(name: str, t: str, root: str, *, seen: str = "b",
                        params: Sequence[str] = ("a", "b")) -> str:
    """``scalar_effect_computation`` whose effect outfeeds ``seen`` (what each call saw):
    the reducer, comparator or combiner whose calls the outfeed lists in order."""
    return scalar_effect_computation(
        name, t, f"  tok = token[] after-all()\n"
        f"  o = token[] outfeed({seen}, tok), outfeed_shape={t}[]\n", root, params=params)


def scatter_entry(t: str, size: int, updates: int, combiner: str, *, root: str = "sc") -> str:
    """The ENTRY computation ``e`` of a scatter of scalar updates: operand ``x`` (``t[size]``),
    indices ``i`` (``s32[updates,1]``), updates ``u`` (``t[updates]``); update ``k`` is
    combined by ``combiner`` into ``x[i[k]]`` (skipped when out of bounds)."""
    params = parameters(f"x = {t}[{size}]", f"i = s32[{updates},1]", f"u = {t}[{updates}]")
    return (f"ENTRY e {{\n{params}"
            f"  ROOT {root} = {t}[{size}] scatter(x, i, u), update_window_dims={{}}, "
            "inserted_window_dims={0},\n"
            "      scatter_dims_to_operand_dims={0}, index_vector_dim=1, "
            f"to_apply={combiner}\n}}\n")


#: Module texts more than one test file runs, by name.
MODULES: dict[str, str] = {
    # A map whose body calls a branch holding a site of delta 3 (adding the low word it
    # reads) for elements below 2, and one without a site for the others; the state is
    # read before and after the map (rng-state tests, CPU and GPU).
    "map-pred-conditional-state": (
        "HloModule m\n"
        "yes {\n  y = u64[] parameter(0)\n" + state_read(3) +
        "  ROOT r = u64[] add(y, l)\n}\n"
        "no {\n  ROOT n = u64[] parameter(0)\n}\n"
        "body {\n  x = u64[] parameter(0)\n  two = u64[] constant(2)\n"
        "  p = pred[] compare(x, two), direction=LT\n"
        "  ROOT c = u64[] conditional(p, x, x), true_computation=yes, false_computation=no\n"
        "}\n" + state_bracket(parameters("p = u64[4]"),
                              "  m = u64[4] map(p), dimensions={0}, to_apply=body\n",
                              [("m", "u64[4]")])),
    # A map whose body adds the next infeed value (f32) to its element and outfeeds the
    # element: the infeed is read and the outfeed written in row-major order.
    # A while loop whose condition is constant true: it never stops (the iteration
    # limit's messages: CLI and message tests)
    "endless-while": """HloModule m
cond {
  p = s32[] parameter(0)
  ROOT t = pred[] constant(true)
}
body {
  p = s32[] parameter(0)
  one = s32[] constant(1)
  ROOT n = s32[] add(p, one)
}
ENTRY e {
  z = s32[] constant(0)
  ROOT w = s32[] while(z), condition=cond, body=body
}
""",
    # One elementwise op each, for the oracle tests (XLA:CPU and TensorFlow's XLA)
    "add-f32": """HloModule add_f32

ENTRY main {
  x = f32[2,3] parameter(0)
  y = f32[2,3] parameter(1)
  ROOT s = f32[2,3] add(x, y)
}
""",
    "negate-f32-scalar": """HloModule s
ENTRY main {
  x = f32[] parameter(0)
  ROOT n = f32[] negate(x)
}
""",
    "multiply-f32-pairs": """HloModule ftz
ENTRY main {
  x = f32[2] parameter(0)
  y = f32[2] parameter(1)
  ROOT m = f32[2] multiply(x, y)
}
""",
    # ragged-dot with lhs rows split into 3 groups (s64 sizes), each multiplied by its
    # rhs group, and with the contracting dimension split (s32 sizes): one output per
    # group (CPU and GPU tests; references: ragged_dot_reference.py)
    "ragged-dot-non-contracting": """HloModule m
ENTRY e {
  a = f32[10,4] parameter(0)
  b = f32[3,4,5] parameter(1)
  g = s64[3] parameter(2)
  ROOT r = f32[10,5] ragged-dot(a, b, g), lhs_contracting_dims={1}, rhs_contracting_dims={1}, lhs_ragged_dims={0}, rhs_group_dims={0}
}""",
    "ragged-dot-contracting": """HloModule m
ENTRY e {
  a = f32[6,9] parameter(0)
  b = f32[9,5] parameter(1)
  g = s32[3] parameter(2)
  ROOT r = f32[3,6,5] ragged-dot(a, b, g), lhs_contracting_dims={1}, rhs_contracting_dims={0}, lhs_ragged_dims={1}
}""",
    "map-infeed-outfeed": """HloModule m
body {
  x = f32[] parameter(0)
  tok = token[] after-all()
  i = (f32[], token[]) infeed(tok)
  v = f32[] get-tuple-element(i), index=0
  t2 = token[] get-tuple-element(i), index=1
  o = token[] outfeed(x, t2), outfeed_shape=f32[]
  ROOT r = f32[] add(x, v)
}
ENTRY e {
  x = f32[3] parameter(0)
  ROOT m = f32[3] map(x), dimensions={0}, to_apply=body
}
""",
}
