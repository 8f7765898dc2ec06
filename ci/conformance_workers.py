"""The worker processes of ci/conformance.py: XLA in one (it may abort: ``_xla_job``
parses, compiles and runs a module on seeded inputs), hloref in another (it may hang:
``_hloref_job`` parses, prints, reparses, evaluates and judges); ``Worker`` restarts a
child that dies, re-executing ``ci/conformance.py --worker KIND``; ``Cache`` keeps XLA's
answers by text hash (``xla_cached``)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import traceback

import numpy as np

from hloref.op_properties import opcodes_with

from conformance_extract import parse_or_none
from conformance_judge import judge
from conformance_layout import MAX_DEVICES

#: The script the workers run (``--worker KIND``).
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conformance.py")


def _xla_job(job):
    from jaxlib import xla_client as xc
    kind = job[0]
    if kind == "parse":
        try:
            xc.hlo.hlo_module_from_text(job[1])
            return ("ok", None)
        except Exception as e:
            return ("error", f"{type(e).__name__}: {e}")
    if kind == "run":
        import numpy as np
        from hloref.fuzz.oracles import xla as oracle
        from hloref.fuzz.oracles.errors import OracleError, OracleUnsupported
        text, seed = job[1], job[2]
        note = None
        if len(job) > 3 and job[3] == "logical-bitcasts":
            import hloref
            from hloref.printer import module_to_text
            from logical_bitcasts import rewrite
            module = hloref.parse(text)
            if rewrite(module):
                return ("unsupported", "a bitcast between element types of different widths "
                        "or packed/dynamic shapes: no logical equivalent for XLA:CPU")
            text, note = module_to_text(module), "bitcasts run as transpose/reshape"
        try:
            exe = oracle.compile_hlo(text)
            rng = np.random.default_rng(seed)
            n = exe.replicas * exe.partitions
            if n > 1:  # each device its own inputs (a list of n per parameter)
                args = [[_random_for_xla_shape(s, rng) for _ in range(n)]
                        for s in exe.parameter_shapes]
            else:
                args = [_random_for_xla_shape(s, rng) for s in exe.parameter_shapes]
            for i, bound in (job[4] if len(job) > 4 and job[4] else {}).items():
                args[i] = [_within(a, bound) for a in args[i]] if n > 1 else _within(args[i], bound)
            if _nbytes(args) > MAX_BYTES:
                return ("too-big", f"inputs over {MAX_BYTES >> 20} MiB")
            value = exe.run(*args)
            if _nbytes(value) > MAX_BYTES:
                return ("too-big", f"result over {MAX_BYTES >> 20} MiB")
            oracle.clear_cache()
            return ("ok", (args, value) if note is None else (args, value, note))
        except OracleUnsupported as e:
            return ("unsupported", str(e))
        except OracleError as e:
            return ("error", str(e))
    raise ValueError(kind)


#: Modules whose inputs or result take more than this are not evaluated (the cache and
#: the comparison would hold them several times).
MAX_BYTES = 64 << 20


def _nbytes(value) -> int:
    if isinstance(value, (tuple, list)):
        return sum(_nbytes(v) for v in value)
    return int(getattr(value, "nbytes", 0))


def _within(value, bound: int):
    """A seeded size draw moved into [0, bound] (``value mod (bound + 1)``: the same draws,
    so every other parameter keeps its value)."""
    v = np.asarray(value)
    return np.mod(v, bound + 1).astype(v.dtype)


def bounded_sizes(text: str) -> dict:
    """{entry parameter number: bound} for the scalar integer parameters that are a
    ``set-dimension-size``'s size operand (directly, or through convert/reshape/copy/
    bitcast), with the smallest bound they set: seeded within [0, bound], the op's
    domain (a size above the bound is undefined), in both runs."""
    module = parse_or_none(text)
    if module is None:
        return {}
    out: dict = {}
    for instr in module.entry.instructions:
        if instr.opcode != "set-dimension-size" or len(instr.operands) != 2:
            continue
        size = instr.operands[1]
        # through ops that forward its value (a convert only retypes an integer size)
        while size.opcode in opcodes_with("same-shape-forward") | {"convert"} and size.operands:
            size = size.operands[0]
        dims = tuple(instr.attrs.get("dimensions") or ())
        shape = instr.shape
        if size.opcode != "parameter" or len(dims) != 1 or not hasattr(shape, "dims") or \
                getattr(size.shape, "dims", None) != () or \
                not (size.shape.element_type.is_integer):
            continue
        k = size.parameter_number
        out[k] = min(out.get(k, shape.dims[dims[0]]), shape.dims[dims[0]])
    return out


def _random_for_xla_shape(shape, rng):
    """``hloref.inputs.random_value`` for a shape XLA reports."""
    import numpy as np
    from hloref.inputs import random_value
    from hloref.shapes import ArrayShape
    from hloref.types import from_dtype
    if shape.is_tuple():
        return tuple(_random_for_xla_shape(s, rng) for s in shape.tuple_shapes())
    et = from_dtype(np.dtype(shape.numpy_dtype()))
    dims = tuple(shape.dimensions())
    return random_value(ArrayShape(et, dims, (False,) * len(dims), None), rng)


def _hloref_job(job):
    """Parse, print and reparse; with inputs, evaluate and judge XLA:CPU's value
    (``job[3]``) as ``hloref diff`` does: within the per-type ULP floor is a match;
    otherwise the value must lie inside the numerical envelope (``fuzz/envelope.py``),
    or a documented semantic gap (``fuzz/known_classes.py``) must explain it."""
    import time as _time

    import hloref
    from hloref.printer import module_to_text
    text, args = job[1], job[2]
    expected = job[3] if len(job) > 3 else None
    out: dict = {}
    try:
        module = hloref.parse(text)
    except hloref.HloError as e:
        return {"parse": "error", "message": str(e).splitlines()[0] if str(e) else type(e).__name__}
    except Exception as e:
        return {"parse": "crash", "message": f"{type(e).__name__}: {e}",
                "traceback": traceback.format_exc(limit=8)}
    out["parse"] = "ok"
    try:
        printed = module_to_text(module)
        out["printed"] = printed
        again = hloref.parse(printed)
        out["reparse"] = "ok" if again == module else "differs"
    except Exception as e:
        out["reparse"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    if args is None:
        return out
    limits = hloref.Limits(max_bytes=4 << 30, max_while_iterations=2_000_000)
    try:
        t0 = _time.perf_counter()
        value = hloref.evaluate(module, *args, limits=limits)
        out["eval_seconds"] = _time.perf_counter() - t0
        out["eval"] = "ok"
    except hloref.HloError as e:
        out["eval"] = type(e).__name__
        out["message"] = str(e).splitlines()[0] if str(e) else type(e).__name__
        return out
    except Exception as e:
        out["eval"] = "crash"
        out["message"] = f"{type(e).__name__}: {e}"
        out["traceback"] = traceback.format_exc(limit=8)
        return out
    if expected is not None:
        try:
            out.update(judge(module, args, expected, value, out["eval_seconds"], limits))
        except Exception as e:
            out["verdict"], out["compare_message"] = "mismatch", \
                f"comparison failed: {type(e).__name__}: {e}"
    return out


def worker_main(kind: str) -> None:
    from hloref.fuzz.workers import serve
    fn = _xla_job if kind == "xla" else _hloref_job
    serve("ready", lambda job: ("done", fn(job)), glue=lambda message: ("glue", message))


class Worker:
    """A child process running ``_xla_job`` or ``_hloref_job``; restarted when it dies."""

    def __init__(self, kind: str, timeout: float):
        self.kind, self.timeout = kind, timeout
        self.proc = self.conn = None
        self.stderr = open(os.devnull, "wb")

    def _start(self):
        from hloref.fuzz.workers import Channel
        env = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
        if self.kind == "xla":  # multi-device modules run on that many host devices
            env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_"
                                f"count={MAX_DEVICES}").strip()
        self.proc = subprocess.Popen([sys.executable, SCRIPT, "--worker", self.kind],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, env=env)
        self.conn = Channel(self.proc.stdout.fileno(), self.proc.stdin.fileno())
        if not self.conn.poll(300):
            raise RuntimeError(f"{self.kind} worker did not start")
        self.conn.recv()

    def kill(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc.stdin.close()
            self.proc.stdout.close()
        self.proc = self.conn = None

    def __call__(self, *job, timeout: float | None = None):
        """("done", result) | ("crash", message) | ("timeout", message) | ("glue", message)."""
        if self.proc is None or self.proc.poll() is not None:
            self.kill()
            self._start()
        try:
            self.conn.send(job)
            if not self.conn.poll(timeout or self.timeout):
                self.kill()
                return ("timeout", f"no answer in {timeout or self.timeout:g} s")
            return self.conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            code = self.proc.wait() if self.proc else None
            self.kill()
            return ("crash", f"the {self.kind} worker died (exit status {code})")

    def close(self):
        if self.conn is not None:
            try:
                self.conn.send(None)
                self.proc.wait(5)
            except Exception:
                pass


class Cache:
    def __init__(self, path: str | None):
        self.path = path
        if path:
            os.makedirs(path, exist_ok=True)

    def get(self, name: str):
        if not self.path:
            return None
        p = os.path.join(self.path, name)
        if os.path.exists(p):
            with open(p, "rb") as f:
                try:
                    return pickle.load(f)
                except Exception:
                    return None
        return None

    def put(self, name: str, value) -> None:
        if self.path:
            tmp = os.path.join(self.path, name + ".tmp")
            with open(tmp, "wb") as f:
                pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, os.path.join(self.path, name))


def xla_cached(cache: Cache, xla: Worker, name: str, *job, timeout=None, cached_only=False):
    got = cache.get(name)
    if got is None and cached_only:
        return ("not-attempted", "XLA:CPU was not run on this module (--cached-only)")
    if got is None:
        got = xla(*job, timeout=timeout)
        if got[0] == "glue":  # a bug of this script: do not cache it
            return got
        if got[0] == "done":
            got = got[1]
        else:  # crash / timeout / glue: XLA did not give an answer
            got = (got[0], got[1])
        cache.put(name, got)
    return got
