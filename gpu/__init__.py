"""hloref's GPU backend: the HLO interpreter on numba.cuda (``numba-cuda``).

``evaluate_gpu(module, values)`` evaluates the entry computation with every buffer
resident on the device (see ``gpu/interpreter.py``); opcodes (or operand types)
without a GPU kernel run their CPU op on host copies of the operands, counted in a
:class:`FallbackReport` and announced by one ``RuntimeWarning`` per opcode and
evaluation (``fallback=False`` raises ``HloUnsupportedError`` instead). Without a GPU,
set ``NUMBA_ENABLE_CUDASIM=1`` before numba.cuda is first imported to run the kernels
in numba's CUDA simulator (slow: Python per thread; for tests).

Kernel launch geometry: ``hloref.gpu.config`` (``THREADS_PER_BLOCK``, ``MAX_BLOCKS``).
"""

from __future__ import annotations

__all__ = ["evaluate_gpu", "unavailable_reason", "supported_opcodes", "gpu_kernel_opcodes", "gpu_status",
           "FallbackReport", "last_report", "is_available"]

#: The fallback report of the latest ``evaluate_gpu`` call in this process.
last_report = None


def _registry():
    from .registry import load_all
    return load_all()


def is_available() -> bool:
    """True when the backend can run: a CUDA GPU, or the simulator is enabled."""
    try:
        from .device import available
    except Exception:  # pragma: no cover - numba-cuda missing or broken
        return False
    return available()


def unavailable_reason() -> str:
    """Why the backend cannot run here (``is_available()`` is false), and what to do."""
    import importlib.util
    try:
        installed = importlib.util.find_spec("numba_cuda") is not None
    except (ImportError, ValueError):
        installed = False
    if not installed:
        return ("the gpu backend needs numba-cuda, which is not installed: "
                "pip install 'hloref[gpu]'")
    return ("the gpu backend needs a CUDA GPU (numba.cuda.is_available() is false); set "
            "NUMBA_ENABLE_CUDASIM=1 to use numba's CUDA simulator")


def evaluate_gpu(module, values, *, limits=None, fallback: bool = True, report=None, io=None,
                 sizes=None):
    """Evaluate ``module``'s entry computation on host ``values`` on the GPU.

    ``values`` are host values already checked against the parameters (numpy arrays,
    tuples, tokens), as ``hloref.evaluate`` passes them; the result is a host value.
    ``fallback=False``: raise ``HloUnsupportedError`` for an op without a GPU kernel
    instead of running it on the CPU. ``report``: a :class:`FallbackReport` to fill
    (also available afterwards as ``hloref.gpu.last_report``). ``io``: the
    ``evaluator.collectives.DeviceIO`` queues of infeed, outfeed and host transfers.
    ``sizes``: the arguments' runtime dimension sizes (``evaluator/dynamic.py``), for
    arguments shorter than their bounded dynamic dimensions."""
    global last_report
    from hloref.errors import HloEvalError
    if not is_available():
        raise HloEvalError(unavailable_reason())
    from .device import to_device, to_host
    from .interpreter import GpuInterpreter
    interp = GpuInterpreter(module, limits=limits, fallback=fallback)
    if io is not None:
        from hloref.evaluator.collectives import single_device
        interp.attach_device(single_device(io))
    if report is not None:
        interp.report = report
    last_report = interp.report
    device_args = [to_device(v) for v in values]
    result = interp.run(device_args, sizes)
    return to_host(result)


def gpu_kernel_opcodes() -> frozenset[str]:
    """Opcodes with a GPU kernel (some still fall back for some element types)."""
    return frozenset(_registry()) | {"parameter"}


def supported_opcodes() -> frozenset[str]:
    """Opcodes the gpu backend evaluates: its kernels plus every CPU op (by fallback)."""
    from hloref.evaluator.registry import INTERPRETER_OPCODES, load_all
    return frozenset(load_all()) | gpu_kernel_opcodes() | INTERPRETER_OPCODES


def gpu_status(opcode: str) -> str:
    """The ``hloref ops`` GPU column: ``yes``, ``yes (...: cpu fallback)``,
    ``cpu fallback: <reason>`` or ``no: <reason>``."""
    from hloref.evaluator.registry import UNSUPPORTED, load_all
    try:
        gpu = _registry()
    except Exception as exc:  # pragma: no cover - numba-cuda missing
        return f"no (the GPU backend cannot load: {type(exc).__name__})"
    if opcode == "parameter":
        return "yes"
    if opcode == "async-start":  # prepared by the GPU interpreter around the wrapped op
        return "yes (the wrapped op or computation runs as it would unwrapped)"
    entry = gpu.get(opcode)
    if entry is not None:
        return f"yes ({entry.note})" if entry.note else "yes"
    if opcode in load_all():
        return "cpu fallback: no GPU kernel for this opcode"
    return "no: " + UNSUPPORTED.get(opcode, "not implemented yet")


def __getattr__(name):
    if name == "FallbackReport":
        from .interpreter import FallbackReport
        return FallbackReport
    raise AttributeError(name)
