"""The envelope's perturbed runs in lockstep (fuzz/lockstep.py) give each run the value it
has when the runs are made one after another (``sampling.sample_program``), bit for
bit: loops whose runs part, conditionals, tuples, updates made in place, ops run once
per run, and the fall back when a run records a budget of its own.

Lockstep is an evaluation order, defined as giving exactly the values of the runs made
one after another, so that path is what it is held to here. The envelope itself is
judged against XLA:CPU elsewhere, through ``sample``, which takes lockstep whenever it
can: tests/test_xla_view.py, test_envelope.py."""

import numpy as np
import pytest

import hloref
from hloref.evaluator.interpreter import Interpreter
from hloref.fuzz import lockstep
from hloref.fuzz.freedoms import EnvelopePolicy
from hloref.fuzz.sampling import sample, sample_lockstep, sample_program

# x += 0.1 while x < 1 (f32): a run rounding the additions down stops one iteration later
# than one rounding them up; the loop also writes each iterate into a buffer
# (dynamic-update-slice in the loop state) and sums it (a reduce: budgets)
COUNTING = """
HloModule counting

add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

cond {
  p = (s32[], f32[], f32[16,4]) parameter(0)
  x = f32[] get-tuple-element(p), index=1
  one = f32[] constant(1)
  ROOT lt = pred[] compare(x, one), direction=LT
}

body {
  p = (s32[], f32[], f32[16,4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[] get-tuple-element(p), index=1
  buf = f32[16,4] get-tuple-element(p), index=2
  step = f32[] constant(0.1)
  x1 = f32[] add(x, step)
  row = f32[1,4] broadcast(x1), dimensions={}
  three = f32[1,4] constant({{3, 3, 3, 3}})
  row3 = f32[1,4] divide(row, three)
  zero = s32[] constant(0)
  buf1 = f32[16,4] dynamic-update-slice(buf, row3, i, zero)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], f32[], f32[16,4]) tuple(i1, x1, buf1)
}

ENTRY main {
  x0 = f32[] parameter(0)
  w = f32[4] parameter(1)
  i0 = s32[] constant(0)
  b0 = f32[16,4] broadcast(w), dimensions={1}
  init = (s32[], f32[], f32[16,4]) tuple(i0, x0, b0)
  loop = (s32[], f32[], f32[16,4]) while(init), condition=cond, body=body
  n = s32[] get-tuple-element(loop), index=0
  buf = f32[16,4] get-tuple-element(loop), index=2
  zero = f32[] constant(0)
  total = f32[4] reduce(buf, zero), dimensions={0}, to_apply=add_f32
  e = f32[4] exponential(total)
  ROOT r = (s32[], f32[4], f32[16,4]) tuple(n, e, buf)
}
"""

# a conditional whose selector a perturbed compare decides, and a sort (run per run)
BRANCHING = """
HloModule branching

lt_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=LT
}

up {
  p = f32[8] parameter(0)
  ROOT m = f32[8] multiply(p, p)
}

down {
  p = f32[8] parameter(0)
  ROOT s = f32[8] sqrt(p)
}

ENTRY main {
  x = f32[8] parameter(0)
  y = f32[8] parameter(1)
  d = f32[8] divide(x, y)
  m = f32[8] multiply(d, y)
  sorted = f32[8] sort(m), dimensions={0}, to_apply=lt_f32
  first = f32[1] slice(m), slice={[0:1]}
  s = f32[] reshape(first)
  x0 = f32[1] slice(x), slice={[0:1]}
  t = f32[] reshape(x0)
  sel = pred[] compare(s, t), direction=EQ
  c = f32[8] conditional(sel, sorted, sorted), true_computation=up, false_computation=down
  ROOT r = (f32[8], f32[8]) tuple(c, d)
}
"""


def _sequential(module, args, policy):
    return sample_program(lambda hooks: Interpreter(
        module, **hooks.interpreter_options(module)).run(list(args)), policy)


def _bytes(value):
    if isinstance(value, tuple):
        return [b for v in value for b in _bytes(v)]
    return [(str(np.asarray(value).dtype), np.asarray(value).shape,
             np.ascontiguousarray(value).tobytes())]


def _same_runs(module, args, policy):
    together = sample_lockstep(module, args, policy)
    assert together is not None, "the lockstep runs fell back"
    alone = _sequential(module, args, policy)
    assert _bytes(together.nominal) == _bytes(alone.nominal)
    assert len(together.samples) == len(alone.samples) == policy.samples
    for a, b in zip(together.samples, alone.samples):
        assert _bytes(a) == _bytes(b)
    assert together.rewrites == alone.rewrites
    assert together.peak == alone.peak
    return together


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_loop_whose_runs_part_is_finished_run_by_run(seed, monkeypatch):
    module = hloref.parse(COUNTING)
    args = [np.float32(0.0), np.array([0.5, 1.5, -2.25, 3.0], np.float32)]
    parted, in_place = [], []
    part, update = lockstep.LockstepInterpreter._part, lockstep._in_place

    def counting_part(self, *a, **k):
        parted.append(1)
        return part(self, *a, **k)

    def counting_update(*a, **k):
        done = update(*a, **k)
        in_place.append(done)
        return done

    monkeypatch.setattr(lockstep.LockstepInterpreter, "_part", counting_part)
    monkeypatch.setattr(lockstep, "_in_place", counting_update)
    s = _same_runs(module, args, EnvelopePolicy(seed=seed))
    counts = {int(v[0]) for v in s.samples}
    assert len(counts) > 1 and parted, "the runs did not part: the test checks nothing"
    assert any(in_place)


@pytest.mark.parametrize("seed", [0, 3])
def test_conditionals_sorts_and_tuples(seed):
    module = hloref.parse(BRANCHING)
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.5, 2, 8).astype(np.float32)
    y = rng.uniform(0.5, 2, 8).astype(np.float32)
    _same_runs(module, [x, y], EnvelopePolicy(seed=seed, samples=8))


def test_sample_takes_the_lockstep_path_and_falls_back_when_a_run_records_a_budget(
        monkeypatch):
    module = hloref.parse(COUNTING)
    args = [np.float32(0.0), np.array([0.5, 1.5, -2.25, 3.0], np.float32)]
    calls = []
    run = lockstep.run_lockstep

    def counting(*a, **k):
        calls.append(1)
        return run(*a, **k)

    import hloref.fuzz.sampling as sampling
    monkeypatch.setattr(sampling, "run_lockstep", counting)
    policy = EnvelopePolicy(seed=0)
    got = sample(module, args, policy)
    assert calls, "sample did not run the perturbed runs in lockstep"
    alone = _sequential(module, args, policy)
    assert [_bytes(v) for v in got.samples] == [_bytes(v) for v in alone.samples]

    # a run that records a budget where the nominal run recorded none (here: every
    # accumulation's budget dropped after the nominal run) makes lockstep give up
    from hloref.fuzz import perturb
    real = perturb.Perturber.__init__

    def forgetful(self, *a, **k):
        real(self, *a, **k)
        if self.rng is not None:
            self.budgets.clear()

    monkeypatch.setattr(perturb.Perturber, "__init__", forgetful)
    assert sample_lockstep(module, args, policy) is None


def _xla_view_cases():
    import test_xla_view as v
    return [("pred-in-call", v.PRED_IN_CALL % "", v.PRED_IN_CALL_ARGS),
            ("pred-through-parameter", v.PRED_THROUGH_PARAMETER % "",
             v.PRED_THROUGH_PARAMETER_ARGS),
            ("divide-by-reshaped-broadcast", v.DIVIDE_BY_RESHAPED_BROADCAST, v.DIVIDE_ARGS),
            ("divide-in-loop", v.LOOP_CONSTANT, [np.full(8, 1e30, np.float32)]),
            ("bf16-in-call", v.BF16_IN_CALL % "",
             [np.full(8, 256, "bfloat16"), np.ones(8, "bfloat16")])]


@pytest.mark.parametrize("case", range(5))
def test_rewrites_through_calls_loops_and_reshapes_take_the_same_values(case):
    # XLA's rewrites seen through inlined calls, reshapes and sunk loop constants
    # (fuzz/xla_view.py): a run takes them in lockstep as it does alone, and some run
    # takes one (else the test would check nothing)
    name, text, args = _xla_view_cases()[case]
    module = hloref.parse(text)
    args = [np.asarray(a, dtype=p.shape.element_type.dtype)
            for a, p in zip(args, module.entry.parameters)]
    s = _same_runs(module, args, EnvelopePolicy(seed=case))
    assert any(s.rewrites) or name == "bf16-in-call", name


def test_a_module_with_a_large_array_is_sampled_run_by_run(monkeypatch):
    # lockstep holds LOCKSTEP_GROUP copies of each differing value: past
    # LOCKSTEP_MAX_ELEMENTS elements in one array the runs go one after another, with
    # the same values
    import hloref.fuzz.sampling as sampling
    module = hloref.parse(COUNTING)  # its largest array: f32[16,4], 64 elements
    args = [np.float32(0.0), np.array([0.5, 1.5, -2.25, 3.0], np.float32)]
    calls = []
    run = lockstep.run_lockstep
    monkeypatch.setattr(sampling, "run_lockstep", lambda *a, **k: calls.append(1) or run(*a, **k))
    policy = EnvelopePolicy(seed=0)
    monkeypatch.setattr(sampling, "LOCKSTEP_MAX_ELEMENTS", 64)
    together = sample(module, args, policy)
    assert calls, "64 elements are within the limit: lockstep"
    calls.clear()
    monkeypatch.setattr(sampling, "LOCKSTEP_MAX_ELEMENTS", 63)
    alone = sample(module, args, policy)
    assert not calls, "an array past the limit: run by run"
    assert [_bytes(v) for v in together.samples] == [_bytes(v) for v in alone.samples]
