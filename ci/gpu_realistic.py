"""The realistic programs (``tests/realistic_programs.py``) on the GPU backend under the
CUDA simulator with ``fallback=False``, against the CPU backend byte for byte.

    python ci/gpu_realistic.py [--limit SECONDS] [--only a,b,c] [--out FILE.jsonl]

(default output: out/gpu_realistic.jsonl, git-ignored).

One program per subprocess (the simulator is slow: a training step takes a minute or
more), each within ``--limit`` seconds (default 90). Prints and writes one JSON line per
program: ``bit-exact``, ``differs (N bytes)``, ``error ...`` (an op the GPU backend
refused, such as a custom-call without a device version), or ``timeout``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _one(name: str) -> dict:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    sys.path.insert(0, str(ROOT / "tests"))
    import numpy as np

    import hloref
    from realistic_programs import PROGRAMS

    program = PROGRAMS[name]()
    lowered = program.lower()
    text = lowered if isinstance(lowered, str) else lowered.as_text(dialect="hlo")
    module = hloref.parse(text)
    cpu = hloref.evaluate(module, *program.args)
    start = time.time()
    try:
        gpu = hloref.evaluate(module, *program.args, backend="gpu", fallback=False)
    except Exception as exc:  # the GPU backend refused an op: reported, not raised
        return {"name": name, "result": f"error {type(exc).__name__}: {str(exc)[:200]}"}

    def leaves(v):
        return list(v) if isinstance(v, tuple) else [v]

    def raw(a):
        return np.frombuffer(np.ascontiguousarray(a).tobytes(), np.uint8)

    pairs = list(zip(leaves(gpu), leaves(cpu)))
    same = len(leaves(gpu)) == len(leaves(cpu)) and all(
        np.asarray(g).dtype == np.asarray(c).dtype and raw(g).size == raw(c).size
        and not np.any(raw(g) != raw(c)) for g, c in pairs)
    differing = sum(int(np.count_nonzero(raw(g) != raw(c)))
                    for g, c in pairs if raw(g).size == raw(c).size)
    return {"name": name, "result": "bit-exact" if same else f"differs ({differing} bytes)",
            "gpu_s": round(time.time() - start, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=float, default=90.0)
    parser.add_argument("--only", default="")
    parser.add_argument("--out", default=str(ROOT / "out" / "gpu_realistic.jsonl"))
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(_one(args.one)))
        return 0
    sys.path.insert(0, str(ROOT / "tests"))
    from realistic_programs import PROGRAMS
    names = [n for n in args.only.split(",") if n] or sorted(PROGRAMS)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w") as out:
        for name in names:
            try:
                run = subprocess.run([sys.executable, __file__, "--one", name], cwd=ROOT,
                                     capture_output=True, text=True, timeout=args.limit)
                lines = [ln for ln in run.stdout.splitlines() if ln.startswith("{")]
                record = json.loads(lines[-1]) if lines else \
                    {"name": name, "result": "crash " + run.stderr[-300:]}
            except subprocess.TimeoutExpired:
                record = {"name": name, "result": f"timeout {args.limit:g}s"}
            print(json.dumps(record), flush=True)
            out.write(json.dumps(record) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
