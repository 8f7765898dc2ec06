"""Compile every kernel the GPU backend's tests launch to PTX for a real GPU (sm_80),
without a GPU: the simulator runs Python, so code the CUDA target cannot type or NVVM
cannot compile passes there unseen.

    bash ci/gpu_ptx_check.sh          # runs tests/gpu in this mode, then prints the tally

How: in a process without the simulator, numba-cuda is told there is a device of
compute capability 8.0; device arrays are host arrays of zeros; a kernel launch types
its arguments, compiles the kernel (every device function it calls too) and asks NVVM
for its PTX, and does not run it. So the tests' values are zeros and their assertions
fail: only the compile outcome counts. (The PTX may hold ``fma.rn``: libdevice's
transcendental functions use it. That the backend's own multiplies and adds are not
contracted is ``tests/test_gpu_ptx.py``'s check.)

Written against numba-cuda 0.30 (``CUDADispatcher.call``, ``_Kernel.bind``,
``CUDACodeLibrary._ensure_cc``): another version stops with a message saying so.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

import numpy as np

CC = (8, 0)
RESULTS: dict = {}


class _Device:
    compute_capability = CC
    id = 0
    name = b"sm_80 (compile only)"


class HostArray(np.ndarray):
    """A "device array" in host memory (zeros): enough of the device-array API for the
    backend's host code."""

    def copy_to_host(self, ary=None, stream=0):
        host = np.asarray(self).copy()
        if ary is not None:
            ary[...] = host
            return ary
        return host

    def copy_to_device(self, ary, stream=0):
        np.asarray(self)[...] = np.asarray(ary).reshape(self.shape)


def install() -> None:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "0"
    from numba import cuda
    from numba.cuda import api, codegen, dispatcher
    missing = [n for n, o in (("CUDADispatcher.call", dispatcher.CUDADispatcher),
                              ("_Kernel.bind", dispatcher._Kernel),
                              ("CUDACodeLibrary._ensure_cc", codegen.CUDACodeLibrary))
               if not hasattr(o, n.split(".")[1])]
    if missing:
        sys.exit(f"gpu_ptx_check: numba-cuda has no {', '.join(missing)}: this check is "
                 f"written for numba-cuda 0.30")

    def to_device(ary, stream=0, copy=True, to=None):
        return np.array(ary, copy=True).view(HostArray)

    def device_array(shape, dtype=np.float64, strides=None, order="C", stream=0):
        return np.zeros(shape, dtype).view(HostArray)

    for mod in (cuda, api):
        mod.to_device = to_device
        mod.device_array = device_array
        mod.device_array_like = lambda a, stream=0: np.zeros_like(a).view(HostArray)
        mod.synchronize = lambda: None
    cuda.is_available = lambda: True
    dispatcher.get_current_device = lambda: _Device()
    codegen.CUDACodeLibrary._ensure_cc = lambda self, cc: cc if cc is not None else CC + ("",)
    dispatcher._Kernel.bind = lambda self: None  # loading the module needs a driver

    def call(self, args, launch_config):
        try:
            argtypes = tuple(self.typeof_pyval(a) for a in args)
        except Exception as e:  # pragma: no cover
            argtypes = (repr(e),)
        key = f"{self.py_func.__qualname__} ({self.py_func.__code__.co_filename}:" \
              f"{self.py_func.__code__.co_firstlineno}) {argtypes}"
        if key in RESULTS:
            return
        try:
            kernel = self.compile(argtypes)
            kernel._codelibrary.get_asm_str(cc=CC)  # NVVM: LLVM IR to PTX
            RESULTS[key] = "ok"
        except Exception as e:
            RESULTS[key] = f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=-3)}"

    dispatcher.CUDADispatcher.call = call


def report(path: str) -> int:
    results = json.load(open(path))
    bad = {k: v for k, v in results.items() if v != "ok"}
    kernels = {k.split(" (")[0] for k in results}
    print(f"PTX for sm_{CC[0]}{CC[1]}: {len(results)} kernel signatures ({len(kernels)} kernels) "
          f"compiled, {len(bad)} failed")
    for k, v in sorted(bad.items()):
        print(f"\n{k}\n  {v[:2000]}")
    return 1 if bad or not results else 0


# the pytest plugin (``-p gpu_ptx_check``): install before the conftests (which ask
# numba.cuda whether kernels can run); write the tally at the end
def pytest_load_initial_conftests(early_config, parser, args):
    install()


def pytest_sessionfinish(session, exitstatus):
    json.dump(RESULTS, open(os.environ["GPU_PTX_OUT"], "w"), indent=1)


if __name__ == "__main__":
    sys.exit(report(sys.argv[1]))
