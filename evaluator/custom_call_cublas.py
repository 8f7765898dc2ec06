"""cuBLAS ``custom-call`` targets of XLA:GPU
(``xla/service/gpu/backend_configs.proto``, ``cublas_cudnn.cc``).

* cuBLAS GEMM (``__cublas$gemm``, ``__cublas$lt$matmul``, ``__cublas$lt$matmul$f8``):
  ``alpha · dot + beta · C`` with ``gemm_backend_config``'s dot dimensions; epilogues
  DEFAULT, BIAS, RELU, BIAS_RELU, GELU, GELU_AUX, BIAS_GELU, BIAS_GELU_AUX (GELU is
  cublasLt's tanh approximation; the ``_AUX`` forms also return the pre-GELU value as
  the second tuple element). ``__cublas$lt$matmul$f8`` with scale operands is
  unsupported (their order and meaning changed between XLA versions).

Each function reads the instruction's ``backend_config`` (JSON of XLA's
``BackendConfig`` / ``GpuBackendConfig`` protos) and computes in f64, rounding once
to the result type. Trailing workspace/scratch results are zeros.
"""

from __future__ import annotations

import numpy as np

from hloref.errors import HloEvalError

from .custom_call import split_result, zeros_like_shape, custom_call
from .numeric import contiguous, finish, to_float64
from .custom_call_vendor import (enum_name, gelu_tanh, general_dot, gpu_config, pack, round_to,
                                 unsupported)


_EPILOGUES = ("DEFAULT", "BIAS", "RELU", "BIAS_RELU", "GELU", "GELU_AUX", "BIAS_GELU",
              "BIAS_GELU_AUX")


@custom_call("__cublas$gemm", "__cublas$lt$matmul", "__cublas$lt$matmul$f8")
def _cublas_gemm(operands, shape, attrs):
    target = attrs["custom_call_target"]
    config = gpu_config(attrs, "gemm_backend_config")
    main, extra = split_result(shape)
    epilogue = enum_name(config.get("epilogue", "DEFAULT"), _EPILOGUES)
    if epilogue not in _EPILOGUES:
        raise unsupported(target, f"cuBLAS epilogue {epilogue}")
    if target.endswith("$f8") and len(operands) > 2:
        raise unsupported(target, "the FP8 GEMM's scale operands (a/b/c/d scales, whose "
                                   "order and meaning vary between XLA versions) are not "
                                   "implemented")
    a, b = operands[0], operands[1]
    if main.element_type.is_complex:
        a, b = np.asarray(a, np.complex128), np.asarray(b, np.complex128)
        alpha = complex(float(config.get("alpha_real", 1.0)), float(config.get("alpha_imag", 0.0)))
    else:
        a, b = to_float64(a), to_float64(b)
        alpha = float(config.get("alpha_real", 1.0))
    out = general_dot(a, b, config.get("dot_dimension_numbers", {})) * alpha
    out = out.reshape(main.dims)
    rest = list(operands[2:])
    beta = float(config.get("beta", 0.0))
    if beta and rest:
        c = rest.pop(0)
        out = out + beta * (np.asarray(c, np.complex128) if np.iscomplexobj(c) else to_float64(c))
    if epilogue.startswith("BIAS"):
        if not rest:
            raise HloEvalError(f"cuBLAS epilogue {epilogue} without a bias operand")
        bias = to_float64(rest.pop(0))
        out = out + bias.reshape((1,) * (out.ndim - bias.ndim) + bias.shape)
    aux = None
    if epilogue.endswith("_AUX"):
        aux = out
    if "RELU" in epilogue:
        out = np.maximum(out, 0)
    elif "GELU" in epilogue:
        out = gelu_tanh(out)
    result = round_to(out, main.element_type) if not main.element_type.is_complex else \
        contiguous(finish(out, main.element_type))
    if aux is not None:
        if not extra:
            raise HloEvalError(f"cuBLAS epilogue {epilogue} needs a tuple result with the "
                               f"auxiliary output")
        return (result, round_to(aux.reshape(extra[0].dims), extra[0].element_type),
                *(zeros_like_shape(w) for w in extra[1:]))
    return pack(result, extra)
