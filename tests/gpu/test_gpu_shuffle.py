"""shuffle on the GPU backend (fallback disabled): bit-exact with the cpu backend and
with values derived by hand (np.roll for rotate, upstream's permute examples from
shuffle_expander_test.cc gathered by index loops). XLA:CPU (jaxlib 0.10.2) predates the
opcode."""

from __future__ import annotations

import numpy as np
import pytest

from gpu_check import check, module, values

#: (type, dims, attributes, expected as a function of x)
CASES = [
    ("f32", (2, 3, 4), "dimensions={2,0}, mode=rotate, shifts={3,-1}",
     lambda x: np.roll(np.roll(x, -3, axis=2), 1, axis=0)),
    ("bf16", (5,), "dimensions={0}, mode=rotate, shifts={12}", lambda x: np.roll(x, -12)),
    ("c64", (3, 4), "dimensions={1}, mode=rotate, shifts={1}", lambda x: np.roll(x, -1, axis=1)),
    ("s4", (3, 2), "dimensions={0}, mode=permute, indices=s32[3,1]{1,0} { {2}, {0}, {1} }",
     lambda x: x[[2, 0, 1]]),
    ("u8", (3, 2), "dimensions={1,0}, mode=permute, indices=s32[3,2,2]{2,1,0} "
     "{ { {0,2}, {1,0} }, { {0,0}, {1,2} }, { {0,1}, {1,1} } }",
     lambda x: np.array([[x[2, 0], x[0, 1]], [x[0, 0], x[2, 1]], [x[1, 0], x[1, 1]]])),
    ("f8e4m3fn", (2, 2, 2), "dimensions={0,2}, mode=permute, "
     "indices=s32[2,1,2,2]{3,2,1,0} { { { {1,1}, {1,0} } }, { { {0,1}, {0,0} } } }",
     lambda x: np.array([[[x[1, j, 1], x[1, j, 0]] for j in range(2)],
                         [[x[0, j, 1], x[0, j, 0]] for j in range(2)]])),
    ("s32", (3,), "dimensions={0}, mode=permute, indices=s32[3]{0} {-4, 7, 1}",
     lambda x: x[[0, 2, 1]]),  # out-of-range coordinates clamp
]


@pytest.mark.parametrize("t,dims,attrs,want", CASES)
def test_shuffle(t, dims, attrs, want):
    x = values(t, dims) if t != "c64" else (values("f32", dims) + 1j * values("f32", dims)
                                            ).astype(np.complex64)
    shape = f"{t}[{','.join(map(str, dims))}]"
    out = check(module([shape], f"shuffle(p0), {attrs}", shape), x, xla=False)
    np.testing.assert_array_equal(out.astype(np.complex128) if t == "c64" else
                                  out.astype(np.float64),
                                  np.asarray(want(x)).astype(out.dtype).astype(
                                      np.complex128 if t == "c64" else np.float64))
