"""Byte-for-byte identity of the envelope's runs between two checkouts.

    python benchmarks/envelope_identity.py dump OUT.npz [--programs A,B,...] [--seeds 0,1]
                                                        [--cache DIR]
    python benchmarks/envelope_identity.py compare BEFORE.npz AFTER.npz

``dump`` samples each realistic program (tests/realistic_programs.py, materialized once
into ``--cache`` so that two checkouts read the same module and inputs) with
``fuzz.sampling.sample`` under ``EnvelopePolicy(seed=s)`` for each seed, and writes the
nominal value, every perturbed value (each leaf's raw bytes, dtype and shape), the
rewrites each perturbed run took (``Sampled.rewrites``) and ``Sampled.peak`` to one
``.npz``. It uses the code of whatever checkout it runs from: to dump another
checkout, run a copy of this script with that checkout's Python and ``PYTHONPATH``
unset (its ``hloref`` is the one installed editable there). ``compare`` prints every
difference and exits 1 if there is one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

#: The programs compared unless ``--programs`` names others.
PROGRAMS = ("transformer_train_large", "transformer_train", "bf16_mlp_train", "rk4_lorenz",
            "lstm_grad", "layer_norm", "fid_sqrtm", "newton_until_converged", "fp8_matmul",
            "mx_block_scaled_matmul", "log_softmax", "welford_stats")


def _leaves(value, path=""):
    """``(path, array)`` for each leaf of a value (tuples flattened; tokens skipped)."""
    if isinstance(value, tuple):
        for k, v in enumerate(value):
            yield from _leaves(v, f"{path}/{k}")
    elif isinstance(value, (np.ndarray, np.generic)):
        yield path or "/", np.asarray(value)


def _materialized(name: str, cache: str, tests: str):
    """``(module text, argument arrays)`` of a realistic program, from ``cache``."""
    directory = os.path.join(cache, name)
    if not os.path.exists(os.path.join(directory, "inputs.npz")):
        sys.path.insert(0, tests)
        import realistic_programs as rp
        rp.materialize(rp.PROGRAMS[name](), cache, dump=False, check=False)
    with open(os.path.join(directory, "module.hlo"), encoding="utf-8") as f:
        text = f.read()
    from hloref.cli_common import read_npz
    return text, read_npz(os.path.join(directory, "inputs.npz"))


def dump(out: str, programs, seeds, cache: str, tests: str, one_at_a_time: bool = False) -> None:
    import hloref
    from hloref.api import coerce_argument
    from hloref.cli_common import unflatten_arguments
    from hloref.fuzz.freedoms import EnvelopePolicy
    from hloref.fuzz import sampling
    from hloref.fuzz.sampling import sample
    if one_at_a_time:
        sampling.lockstep_supported = lambda module: False

    arrays: dict = {}
    manifest: dict = {}
    for name in programs:
        text, flat = _materialized(name, cache, tests)
        module = hloref.parse(text)
        params = module.entry.parameters
        values = unflatten_arguments(flat, [p.shape for p in params])
        values = [coerce_argument(v, p.shape, "argument") for v, p in zip(values, params)]
        for seed in seeds:
            t0 = time.process_time()
            s = sample(module, values, EnvelopePolicy(seed=seed))
            seconds = time.process_time() - t0
            key = f"{name}/seed{seed}"
            runs = [("nominal", s.nominal)] + [(f"sample{k}", v) for k, v in enumerate(s.samples)]
            for run, value in runs:
                for path, leaf in _leaves(value):
                    k = f"{key}/{run}{path}"
                    arrays[k] = np.frombuffer(np.ascontiguousarray(leaf).tobytes(), np.uint8)
                    manifest[k] = [str(leaf.dtype), list(leaf.shape)]
            manifest[f"{key}/rewrites"] = [sorted(r) for r in s.rewrites]
            manifest[f"{key}/peak"] = float(s.peak).hex()
            print(f"{key}: {len(s.samples)} samples, {seconds:.2f} CPU s", flush=True)
    arrays["__manifest__"] = np.frombuffer(json.dumps(manifest).encode(), np.uint8)
    np.savez(out, **arrays)


def compare(before: str, after: str) -> int:
    a, b = np.load(before), np.load(after)
    ma = json.loads(a["__manifest__"].tobytes())
    mb = json.loads(b["__manifest__"].tobytes())
    problems = [f"only in {before}: {k}" for k in sorted(set(ma) - set(mb))]
    problems += [f"only in {after}: {k}" for k in sorted(set(mb) - set(ma))]
    arrays = 0
    for k in sorted(set(ma) & set(mb)):
        if ma[k] != mb[k]:
            problems.append(f"{k}: {ma[k]} != {mb[k]}")
        elif k in a.files:
            arrays += 1
            if not np.array_equal(a[k], b[k]):
                diff = int(np.count_nonzero(a[k] != b[k])) if a[k].shape == b[k].shape else -1
                problems.append(f"{k}: bytes differ ({diff} of {a[k].size} bytes)")
    for p in problems:
        print(p)
    runs = len({k.rsplit("/", 1)[0] for k in ma if k.endswith("/peak")})
    print(f"{arrays} arrays, {runs} (program, seed) samplings compared: "
          f"{'identical' if not problems else f'{len(problems)} differences'}")
    return 1 if problems else 0


def main(argv=None) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump")
    d.add_argument("out")
    d.add_argument("--programs", default=",".join(PROGRAMS))
    d.add_argument("--seeds", default="0,1")
    d.add_argument("--one-at-a-time", action="store_true",
                   help="make the perturbed runs one after another (no lockstep): to compare "
                        "the lockstep path with the plain one in the same checkout")
    d.add_argument("--cache", default="/tmp/hloref-envelope-identity")
    d.add_argument("--tests", default=os.path.join(os.path.dirname(here), "tests"),
                   help="where realistic_programs.py is (to materialize a missing program)")
    c = sub.add_parser("compare")
    c.add_argument("before")
    c.add_argument("after")
    args = parser.parse_args(argv)
    if args.command == "compare":
        return compare(args.before, args.after)
    dump(args.out, args.programs.split(","), [int(s) for s in args.seeds.split(",")],
         args.cache, args.tests, args.one_at_a_time)
    return 0


if __name__ == "__main__":
    sys.exit(main())
