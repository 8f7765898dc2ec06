"""No floating-point contraction on a real GPU: every HLO op rounds once, as on the CPU.

NVVM contracts a multiply feeding an add into one fused multiply-add unless told not
to: its ``-fma`` option defaults to 1, and numba-cuda passes it only with
``fastmath=True`` (``numba.cuda.cudadrv.nvvm.compile_ir``). So ``a * b + c`` in a
device function compiles to ``fma.rn.f32`` (one rounding), while the CPU backend, numba
on LLVM without fast-math flags, rounds the product and then the sum. Measured with
numba-cuda 0.30.4 and libNVVM 2.0 (CUDA 13.0), ``cuda.compile_ptx`` of ``a * b + c``
for ``sm_80``: ``fma.rn.f32`` by default, ``mul.rn.f32`` then ``add.rn.f32`` with
``fma=0``. The backend's claims of bit-for-bit agreement with the CPU (every
elementwise chain, the compiled computations, the f64 accumulations of f64 dots)
need the second.

:func:`no_contraction` wraps numba-cuda's ``compile_ir`` so that NVVM gets ``-fma=0``
whenever the caller did not ask for fast math (hloref never does). The wrap is
process-wide: other numba.cuda code in the same process that relies on contraction
then gets separately rounded products (more exact, never less), unless it uses
``fastmath=True``. Applied by ``gpu/device.py`` when not simulating (the simulator runs
Python arithmetic, one rounding per operation, and has no NVVM).
"""

from __future__ import annotations

__all__ = ["no_contraction"]

_MARK = "_hloref_no_contraction"


def no_contraction() -> bool:
    """Wrap NVVM's compile entry points (once); True when they are wrapped."""
    try:
        from numba.cuda.cudadrv import nvvm
    except ImportError:  # pragma: no cover - another numba-cuda layout
        return False
    original = nvvm.compile_ir
    if getattr(original, _MARK, False):
        return True

    def compile_ir(llvmir, **options):
        if not options.get("fastmath"):
            options.setdefault("fma", False)
        return original(llvmir, **options)

    setattr(compile_ir, _MARK, True)
    nvvm.compile_ir = compile_ir  # codegen calls it through the module, at each compile
    return True
