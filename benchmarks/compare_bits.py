"""Bit-for-bit check of two checkouts' results on random dot / reduce / elementwise cases.

    python benchmarks/compare_bits.py save OUT.npz      # with each checkout's Python
    python benchmarks/compare_bits.py compare A.npz B.npz

``save`` evaluates 1,500 random modules (fixed seed; f32 and f64; dots [m,k]x[k,n] and
batched, m, k, n < 160, a fifth of the lhs in Fortran order, magnitudes 1e-30 to 1e30;
add reduces of rank 1 to 3 over one dimension; add, multiply, subtract, divide of up
to 5,000 elements), each twice (the second call takes the cached plan and must give
the first's bytes), and saves every result; ``compare`` prints how many differ in
dtype, shape or any byte. docs/benchmarks.md ("Round 3") quotes it.
"""

from __future__ import annotations

import sys

import numpy as np

import hloref
from hloref.op_properties import opcodes_with
from hloref.opcodes import CATALOGUE

ADD = "add {\n p = TY[] parameter(0)\n q = TY[] parameter(1)\n ROOT s = TY[] add(p, q)\n}\n"


def _dot(rng, ty, dt, scale):
    m, k, n = (int(v) for v in rng.integers(1, 160, 3))
    batch = int(rng.integers(1, 4)) if rng.random() < 0.3 else 0
    lead = (batch,) if batch else ()
    dims = ("lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, "
            "rhs_contracting_dims={1}") if batch else \
        "lhs_contracting_dims={1}, rhs_contracting_dims={0}"

    def text(s):
        return f"{ty}[{','.join(map(str, s))}]"
    module = (f"HloModule m\nENTRY e {{\n a = {text(lead + (m, k))} parameter(0)\n"
              f" b = {text(lead + (k, n))} parameter(1)\n"
              f" ROOT r = {text(lead + (m, n))} dot(a, b), {dims}\n}}")
    a = (rng.standard_normal(lead + (m, k)) * scale).astype(dt)
    b = rng.standard_normal(lead + (k, n)).astype(dt)
    if rng.random() < 0.2:
        a = np.asfortranarray(a)
    return module, (a, b)


def _reduce(rng, ty, dt, scale):
    shape = tuple(int(v) for v in rng.integers(1, 50, int(rng.integers(1, 4))))
    d = int(rng.integers(0, len(shape)))
    kept = [s for i, s in enumerate(shape) if i != d]
    module = (f"HloModule m\n{ADD.replace('TY', ty)}ENTRY e {{\n"
              f" x = {ty}[{','.join(map(str, shape))}] parameter(0)\n z = {ty}[] constant(0.5)\n"
              f" ROOT r = {ty}[{','.join(map(str, kept))}] reduce(x, z), dimensions={{{d}}}, "
              f"to_apply=add\n}}")
    return module, ((rng.standard_normal(shape) * scale).astype(dt),)


#: the four arithmetic ops an exact wider computation checks (add, divide, multiply, subtract)
_BINARY_ARITHMETIC = sorted(o for o in opcodes_with("random-rounded") if CATALOGUE[o].arity == 2)


def _elementwise(rng, ty, dt, scale, case):
    op = _BINARY_ARITHMETIC[case % len(_BINARY_ARITHMETIC)]
    n = int(rng.integers(1, 5000))
    module = (f"HloModule m\nENTRY e {{\n x = {ty}[{n}] parameter(0)\n y = {ty}[{n}] parameter(1)\n"
              f" ROOT r = {ty}[{n}] {op}(x, y)\n}}")
    return module, tuple((rng.standard_normal(n) * scale).astype(dt) for _ in range(2))


def save(out: str) -> None:
    rng = np.random.default_rng(20261129)
    results = {}
    for case in range(1500):
        ty, dt = (("f32", np.float32), ("f64", np.float64))[case % 2]
        scale = 10.0 ** int(rng.integers(-30, 31))
        kind = case % 3
        if kind == 0:
            text, args = _dot(rng, ty, dt, scale)
        elif kind == 1:
            text, args = _reduce(rng, ty, dt, scale)
        else:
            text, args = _elementwise(rng, ty, dt, scale, case)
        module = hloref.parse(text)
        first = np.asarray(hloref.evaluate(module, *args))
        second = np.asarray(hloref.evaluate(module, *args))
        assert first.tobytes() == second.tobytes(), f"case {case}: the cached plan differs"
        results[f"c{case}"] = first
    np.savez(out, **results)
    print(f"saved {len(results)} results to {out}")


def compare(a_path: str, b_path: str) -> int:
    a, b = np.load(a_path), np.load(b_path)
    differ = [k for k in a.files if a[k].dtype != b[k].dtype or a[k].shape != b[k].shape
              or a[k].tobytes() != b[k].tobytes()]
    print(f"{len(a.files)} cases, {len(differ)} differ {differ[:10]}")
    return 1 if differ else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "save":
        save(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    else:
        sys.exit(__doc__)
