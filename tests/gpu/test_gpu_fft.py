"""fft on the GPU backend (fallback disabled) against the cpu backend (numpy's pocketfft
in c128) and XLA:CPU (ducc), each within the accumulation envelope: the kernels sum
every line directly (n terms), the others by radix passes."""

from __future__ import annotations

import numpy as np
import pytest

from hloref.fuzz.compare import accumulation_atol
from hloref.types import element_type

from gpu_check import RNG, check

FFT = """HloModule f
ENTRY e {{
  x = {src} parameter(0)
  ROOT y = {dst} fft(x), fft_type={kind}, fft_length={{{lengths}}}
}}
"""

#: (operand, result, fft_type, fft_length)
CASES = [
    ("c64[2,8]", "c64[2,8]", "FFT", "8"),
    ("c64[3,4,6]", "c64[3,4,6]", "IFFT", "4,6"),
    ("c128[2,3,5]", "c128[2,3,5]", "FFT", "2,3,5"),
    ("f32[2,8]", "c64[2,5]", "RFFT", "8"),
    ("f64[3,6]", "c128[3,4]", "RFFT", "3,6"),
    ("c64[2,5]", "f32[2,8]", "IRFFT", "8"),
    ("c64[3,4]", "f32[3,7]", "IRFFT", "3,7"),
    ("c128[2,2,3]", "f64[2,2,4]", "IRFFT", "2,4"),
]


def _operand(spec):
    t, dims = spec.split("[")
    dims = [int(d) for d in dims[:-1].split(",")]
    et = element_type(t)
    x = RNG.standard_normal(dims)
    if et.is_complex:
        x = x + 1j * RNG.standard_normal(dims)
    return x.astype(et.dtype)


@pytest.mark.parametrize("src,dst,kind,lengths", CASES)
def test_fft(src, dst, kind, lengths):
    x = _operand(src)
    n = int(np.prod([int(v) for v in lengths.split(",")]))
    # every output is a sum of n terms of magnitude <= sum |x| (IRFFT: its Hermitian
    # extension, up to twice that)
    bound = accumulation_atol(n, 2 * float(np.sum(np.abs(x.astype(np.complex128)))),
                              element_type(dst.split("[")[0]))
    check(FFT.format(src=src, dst=dst, kind=kind, lengths=lengths), x, exact=False,
          opcode="fft", atol=bound, xla="required")


def test_fft_by_hand():
    """A unit impulse at 1 transforms to the twiddles e^(-2 pi i k / 4)."""
    x = np.array([0, 1, 0, 0], np.complex64)
    out = check(FFT.format(src="c64[4]", dst="c64[4]", kind="FFT", lengths="4"), x,
                exact=False, opcode="fft", xla="required")
    np.testing.assert_allclose(out, [1, -1j, -1, 1j], atol=1e-7)
