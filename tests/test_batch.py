"""Batched oracle runs (fuzz/batch.py): programs combined into one module give XLA:CPU's
values of each program alone; a part that is not a match is confirmed alone; a batch
XLA refuses is split until the refused program runs alone."""

from __future__ import annotations

import json

import numpy as np
import pytest

import hloref

pytest.importorskip("jax")

from hloref.fuzz.batch import Refusals, check_batch, combine  # noqa: E402
from hloref.fuzz.stats import Stats  # noqa: E402
from hloref.fuzz.workers import OracleResult, OracleWorker  # noqa: E402

# (name, text, arguments): a called computation, a tuple root, a tuple parameter
PROGRAMS = [
    ("reduce", "HloModule r\n\nadd {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n"
               "  ROOT s = f32[] add(x, y)\n}\n\nENTRY e {\n  a = f32[3,4] parameter(0)\n"
               "  z = f32[] constant(0)\n  ROOT r = f32[3] reduce(a, z), dimensions={1}, "
               "to_apply=add\n}\n",
     [np.arange(12, dtype=np.float32).reshape(3, 4) / 7]),
    ("tuple-root", "HloModule t\n\nENTRY e {\n  a = s8[4] parameter(0)\n  b = s8[4] parameter(1)\n"
                   "  c = s8[4] add(a, b)\n  ROOT t = (s8[4], s8[4]) tuple(c, a)\n}\n",
     [np.array([100, -100, 5, 7], np.int8), np.array([100, -100, 1, 2], np.int8)]),
    ("tuple-param", "HloModule p\n\nENTRY e {\n  p = (f64[2], f64[2]) parameter(0)\n"
                    "  x = f64[2] get-tuple-element(p), index=0\n"
                    "  y = f64[2] get-tuple-element(p), index=1\n"
                    "  ROOT m = f64[2] multiply(x, y)\n}\n",
     [(np.array([1.5, -2.0]), np.array([3.0, 0.25]))]),
    ("same-names", "HloModule r\n\nadd {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n"
                   "  ROOT s = f32[] maximum(x, y)\n}\n\nENTRY e {\n  a = f32[3,4] parameter(0)\n"
                   "  z = f32[] constant(-inf)\n  ROOT r = f32[4] reduce(a, z), dimensions={0}, "
                   "to_apply=add\n}\n",
     [np.arange(12, dtype=np.float32).reshape(3, 4) - 5]),
]

#: XLA:CPU (jaxlib 0.10.2) refuses cosh ("UNIMPLEMENTED: cosh"); hloref runs it
REFUSED = "HloModule c\n\nENTRY e {\n  a = f32[2] parameter(0)\n  ROOT c = f32[2] cosh(a)\n}\n"
MULTIPLY = ("HloModule m\n\nENTRY e {\n  a = f32[4] parameter(0)\n  b = f32[4] parameter(1)\n"
            "  ROOT c = f32[4] multiply(a, b)\n}\n")


@pytest.fixture(scope="module")
def xla():
    w = OracleWorker("xla", timeout=120)
    yield w
    w.close()


def _same(a, b):
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    else:
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def test_combined_module_gives_each_program_s_value_alone(xla):
    modules = [hloref.parse(text) for _, text, _ in PROGRAMS]
    batch = combine(modules)
    assert len({n for c in batch.computations.values() for n in
                (i.name for i in c.instructions)}) == sum(1 for _ in batch.instructions())
    together = xla.run(batch.to_text(), [a for _, _, args in PROGRAMS for a in args])
    assert together.ok, together.message
    assert len(together.value) == len(PROGRAMS)
    for (name, text, args), part in zip(PROGRAMS, together.value):
        alone = xla.run(text, args)
        assert alone.ok, (name, alone.message)
        _same(part, alone.value)
    # the inputs are untouched (combine renames a private copy)
    assert [m.to_text() for m in modules] == [hloref.parse(t).to_text() for _, t, _ in PROGRAMS]


class PerturbMultiply:
    """XLA:CPU, except that a module made of one ``multiply`` alone comes back off by one,
    and any module containing a multiply comes back off by one when ``always``."""

    def __init__(self, inner, always: bool):
        self.inner, self.always, self.seconds, self.texts = inner, always, 0.0, []

    def run(self, text, args, **kw):
        self.texts.append(text)
        r = self.inner.run(text, args, **kw)
        if r.ok and " multiply(" in text and (self.always or "batch" not in text):
            r.value = _plus_one(r.value)
        return r


def _plus_one(v):
    if isinstance(v, tuple):
        return tuple(_plus_one(x) for x in v)
    return (v + 1).astype(v.dtype) if v.dtype.kind == "f" else v


def test_a_part_that_differs_is_confirmed_alone(xla):
    items = [(hloref.parse(t), a) for _, t, a in PROGRAMS[:2]]
    items.insert(1, (hloref.parse(MULTIPLY), [np.ones(4, np.float32), np.full(4, 2, np.float32)]))
    stats = Stats()
    worker = PerturbMultiply(xla, always=True)
    outcomes = check_batch(items, worker, stats=stats)
    assert [o.kind for o in outcomes] == ["match", "finding", "match"]
    assert outcomes[1].report.culprit.innermost().opcode == "multiply"
    # the batch holds a multiply, so the f32 reduce's part is off too; alone it matches
    assert stats.batches == 1 and stats.confirmations == 2 and stats.batch_only == 1
    assert sum("batch" not in t for t in worker.texts) >= 2  # the confirmations ran alone


def test_a_part_that_differs_only_in_the_batch_is_not_a_finding(xla):
    class BatchOnly(PerturbMultiply):
        def run(self, text, args, **kw):
            r = self.inner.run(text, args, **kw)
            if r.ok and "batch" in text:
                r.value = (r.value[0], _plus_one(r.value[1]))
            return r

    items = [(hloref.parse(t), a) for _, t, a in (PROGRAMS[0], PROGRAMS[2])]
    stats = Stats()
    outcomes = check_batch(items, BatchOnly(xla, False), stats=stats)
    assert [o.kind for o in outcomes] == ["match", "match"]
    assert stats.confirmations == 1 and stats.batch_only == 1


def test_a_refused_program_is_split_out_and_run_alone(xla):
    items = [(hloref.parse(t), a) for _, t, a in PROGRAMS]
    items.insert(2, (hloref.parse(REFUSED), [np.array([0.5, 2], np.float32)]))
    stats, refusals = Stats(), Refusals()
    outcomes = check_batch(items, xla, stats=stats, refusals=refusals)
    kinds = [o.kind for o in outcomes]
    assert kinds == ["match", "match", "rejected", "match", "match"], [o.message for o in outcomes]
    assert "UNIMPLEMENTED: cosh" in outcomes[2].message
    assert stats.batch_splits >= 1 and stats.alone_runs >= 1
    assert refusals.pairs == {("cosh", "f32")}
    assert refusals.opcodes == {"cosh"}  # "UNIMPLEMENTED: cosh": whatever the element type
    assert refusals.refused(hloref.parse(REFUSED.replace("f32", "f64")))
    copy = Refusals()
    copy.merge(json.loads(json.dumps(refusals.to_json())))
    assert copy.pairs == refusals.pairs and copy.opcodes == refusals.opcodes
    # learned: the next cosh program runs alone at once, its batch is not split
    again = Stats()
    outcomes = check_batch(items[1:4], xla, stats=again, refusals=refusals)
    assert [o.kind for o in outcomes] == ["match", "rejected", "match"]
    assert again.batches == 1 and again.batch_splits == 0 and again.alone_runs == 1


def test_a_crashing_program_is_found_alone(xla):
    class CrashOnMultiply:
        def __init__(self):
            self.seconds = 0.0

        def run(self, text, args, **kw):
            if " multiply(" in text:
                return OracleResult("crash", message="planted crash", signal="SIGABRT")
            return xla.run(text, args, **kw)

    items = [(hloref.parse(t), a) for _, t, a in PROGRAMS]
    items.append((hloref.parse(MULTIPLY), [np.ones(4, np.float32), np.ones(4, np.float32)]))
    stats, refusals = Stats(), Refusals()
    outcomes = check_batch(items, CrashOnMultiply(), stats=stats, refusals=refusals)
    # PROGRAMS[2] multiplies too: both crash alone, the others match alone
    assert [o.verdict for o in outcomes] == ["match", "match", "crash", "match", "crash"]
    assert stats.batches == 1 and stats.alone_runs == 5
    # a reduced crash finding is learned: programs like it run alone from the start
    refusals.learn_crash({"opcodes": ["multiply"], "element_types": ["f32"]})
    again = Stats()
    outcomes = check_batch(items[:2] + items[4:], CrashOnMultiply(), stats=again,
                           refusals=refusals)
    assert [o.verdict for o in outcomes] == ["match", "match", "crash"]
    assert again.batches == 1 and again.batch_splits == 0 and again.alone_runs == 1
