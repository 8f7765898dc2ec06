"""Device forms of the ops whose one-element value is a scalar formula, each the CPU's
arithmetic (registered with ``gpu/computation_emitter.py``): dot (the product, by dot's
rules; the CPU's dots sum from +0, so a one-term float product of -0 gives +0, here too);
convolution, a product or, where the one tap falls in the padding, the padding zero
times rhs; cholesky, a square root; triangular-solve, ``(1 / a) x b`` (complex: numpy's
Smith division and einsum's product in c128, as the CPU); fft of length 1;
batch-norm-inference, -training and -grad; scaled-dot (a rank-0 scale is 1, as the CPU
has it); ragged-dot; stochastic-convert.
"""

from __future__ import annotations

import numpy as np

from hloref.errors import HloEvalError
from hloref.shapes import TupleShape

from . import complex_elementwise
from .computation_emitter import ELEMENT, ONE_ELEMENT, form
from .computation_values import Unsupported, scalar_type, storage_constant
from .device import type_class
from .elementwise import element_fn

__all__ = ["FormulaForms"]


class FormulaForms:
    """The emitter's forms of one-element dots, convolutions, linear algebra, batch norm."""

    @form("dot", stage=ELEMENT)
    def scalar_dot(self, instr, ops, op_types, et):
        """A dot of one-element operands: their product under the CPU's dot rules
        (``dot_operand``): float results multiply float operands exactly in f64 (other
        operands converted to the result type first) and round once; integer results
        convert the operands and wrap (float operands: the product in f32, converted,
        ``integer_result_in_f32``); pred results AND the operands' truth; complex
        results multiply in c128 parts."""
        if instr.attrs.get("algorithm") is not None:
            raise Unsupported("dot with an algorithm")
        if len(ops) != 2:
            raise Unsupported("dot with sparsity metadata")
        return self.product(ops, op_types, et)

    def product(self, ops, op_types, et):
        """The one-term sum of products of two one-element operands by the dot rules
        (``scalar_dot``); the CPU's sums start at +0, so a float product of -0 gives +0."""
        cls = type_class(et)
        if cls in ("sint", "uint") and all(t.is_float for t in op_types):
            from hloref.types import F32  # integer_result_in_f32: in f32, converted
            return self.convert_value(self.product(ops, op_types, F32), F32, et)
        if cls == "complex":
            fn = self.bind("F", complex_elementwise.BINARY["multiply"])
            f64 = self.bind("N", np.float64)
            args = []
            for x, t in zip(ops, op_types):
                if type_class(t) in ("f32", "f64", "narrow"):  # exact, imaginary part 0
                    args += [f"{f64}({self.load(x, t)})", "0.0"]
                    continue
                if type_class(t) != "complex":  # integers and pred: converted to et first
                    x = self.convert_value(x, t, et)
                args += [f"{f64}({x}.real)", f"{f64}({x}.imag)"]
            p = self.line(f"{fn}({', '.join(args)})")
            return self.store_complex(f"({p}[0] + 0.0, {p}[1] + 0.0)", et)
        if cls in ("f32", "f64", "narrow"):
            f64 = self.bind("N", np.float64)
            terms = []
            for x, t in zip(ops, op_types):
                if type_class(t) in ("f32", "f64", "narrow"):
                    terms.append(f"{f64}({self.load(x, t)})")
                elif type_class(t) == "complex":
                    raise Unsupported("complex operands of a real product")
                else:
                    terms.append(f"{f64}({self.load(self.convert_value(x, t, et), et)})")
            return self.line(self.store(f"{terms[0]} * {terms[1]} + 0.0", et))
        if cls in ("sint", "uint", "pred"):
            if any(type_class(t) == "complex" for t in op_types):
                raise Unsupported("complex operands of a real product")
            conv = [self.convert_value(x, t, et) for x, t in zip(ops, op_types)]
            fn = self.bind("F", element_fn("multiply", et))
            return self.line(self.store(f"{fn}({self.load(conv[0], et)}, "
                                        f"{self.load(conv[1], et)})", et))
        raise Unsupported(f"product to {et.name}")

    @form("convolution", stage=ONE_ELEMENT)
    def convolution(self, instr, ops, op_types):
        """A convolution of one-element operands (one window tap, one output): the
        product ``lhs x rhs`` by the dot rules when the tap lands on the element (every
        spatial dimension's low padding 0: the element sits at base-dilated position
        ``low``), else the padding zero times rhs (the CPU multiplies the padded input:
        0 x inf is NaN, 0 x -1 is -0)."""
        et = scalar_type(instr.shape, rank0=False)
        if len(ops) != 2 or any(isinstance(t, list) for t in op_types):
            raise Unsupported("convolution operands")
        window = instr.attrs.get("window")
        dims = list(window.dims) if window is not None and hasattr(window, "dims") else []
        lhs = ops[0]
        if any(int(getattr(d, "padding_low", 0)) != 0 for d in dims):
            lhs = self.bind("C", storage_constant(np.zeros(1), op_types[0]))
        return self.product([lhs, ops[1]], op_types, et), et

    @form("cholesky", stage=ONE_ELEMENT)
    def cholesky(self, instr, ops, op_types):
        """1x1: ``sqrt(a)`` (lower and upper alike; NaN for a negative a), computed in
        f64 and rounded once; complex: the root of the real part, imaginary part 0."""
        et = scalar_type(instr.shape, rank0=False)
        (a,), (t,) = ops, op_types
        if t != et:
            raise Unsupported("cholesky changing the type")
        sqrt = self.f64_fn("sqrt")
        if type_class(et) == "complex":
            root = self.line(f"{sqrt}({self.bind('N', np.float64)}({a}.real))")
            return self.store_complex(f"({root}, 0.0)", et), et
        return self.line(self.store(f"{sqrt}({self.real_operand(a, t)})", et)), et

    @form("triangular-solve", stage=ONE_ELEMENT)
    def triangular_solve(self, instr, ops, op_types):
        """1x1: the CPU's ``0 + (1 / a) x b`` in f64 (it multiplies b by the triangle's
        inverse, a sum from +0), ``0 + 1 x b`` with ``unit_diagonal``; left_side and
        transpose_a do not change a 1x1 real triangle. Complex (``complex_triangular_solve``):
        the CPU's c128 steps."""
        et = scalar_type(instr.shape, rank0=False)
        (a, b), (ta, tb) = ops, op_types
        unit = str(instr.attrs.get("unit_diagonal", "false")).lower() in ("true", "1")
        if ta == et and tb == et and type_class(et) == "complex":
            return self.complex_triangular_solve(instr, a, b, et, unit), et
        if ta != et or tb != et or type_class(et) not in ("f32", "f64", "narrow"):
            raise Unsupported("triangular-solve types")
        div, mul = self.f64_fn("divide"), self.f64_fn("multiply")
        f64 = self.bind("N", np.float64)
        diag = f"{f64}(1.0)" if unit else self.real_operand(a, ta)
        inv = self.line(f"{div}({f64}(1.0), {diag})")
        x = self.line(f"{mul}({inv}, {self.real_operand(b, tb)}) + 0.0")  # a sum from +0
        return self.line(self.store(x, et)), et

    def complex_triangular_solve(self, instr, a, b, et, unit):
        """1x1 complex, the CPU's c128 arithmetic (``evaluator/linalg.py``): the triangle
        ``t`` is ``a`` (``1 + 0i`` with ``unit_diagonal``), conjugated for ADJOINT; its
        inverse is numpy's Smith division ``(1 + 0i) / t`` (``complex_elementwise.smith``,
        no Annex G recovery: numpy's ``/``); then einsum's one-term sum of products from
        +0: ``inv x b`` (left_side) or ``b x inv``, each part ``re1 x re2 - im1 x im2``
        and ``re1 x im2 + im1 x re2`` plus 0; rounded once to c64."""
        from hloref.evaluator.linalg import transpose_mode
        trans = transpose_mode(instr.attrs.get("transpose_a") or "NO_TRANSPOSE")
        left = str(instr.attrs.get("left_side", "false")).lower() in ("true", "1")
        f64 = self.bind("N", np.float64)
        tr, ti = ("1.0", "0.0") if unit else (f"{a}.real", f"{a}.imag")
        tr, ti = self.line(f"{f64}({tr})"), self.line(f"{f64}({ti})")
        if trans == "ADJOINT":
            ti = self.line(f"-{ti}")
        inv = self.line(f"{self.bind('F', complex_elementwise.smith)}({f64}(1.0), "
                        f"{f64}(0.0), {tr}, {ti})")
        ir, ii = f"{inv}[0]", f"{inv}[1]"
        br, bi = self.line(f"{f64}({b}.real)"), self.line(f"{f64}({b}.imag)")
        (xr, xi), (yr, yi) = ((ir, ii), (br, bi)) if left else ((br, bi), (ir, ii))
        re = self.line(f"{xr} * {yr} - {xi} * {yi}")
        im = self.line(f"{xr} * {yi} + {xi} * {yr}")
        return self.store_complex(f"({re} + 0.0, {im} + 0.0)", et)

    @form("fft", stage=ONE_ELEMENT)
    def fft(self, instr, ops, op_types):
        """Length 1 in every transformed dimension: FFT and IFFT give the element; RFFT
        the real element with imaginary part 0; IRFFT the real part."""
        et = scalar_type(instr.shape, rank0=False)
        (x,), (t,) = ops, op_types
        if any(int(v) != 1 for v in instr.attrs.get("fft_length")):
            raise Unsupported("fft length")
        kind = str(instr.attrs.get("fft_type")).upper()
        if kind in ("FFT", "IFFT") and t == et and type_class(t) == "complex":
            return x, et
        if kind == "RFFT" and type_class(et) == "complex":
            return self.store_complex(f"({self.real_operand(x, t)}, 0.0)", et), et
        if kind == "IRFFT" and type_class(t) == "complex" and type_class(et) != "complex":
            return self.line(self.store(f"{self.bind('N', np.float64)}({x}.real)", et)), et
        raise Unsupported(f"fft {kind}")

    def epsilon(self, instr, et):
        from hloref.evaluator.linalg import xla_epsilon
        return repr(float(xla_epsilon(instr.attrs.get("epsilon"), et)))

    def batch_norm_operands(self, instr, ops, op_types, arity):
        """``(element type, real operands, f64 divide, f64 sqrt)`` of a one-element
        batch-norm-*: every operand and result of one type (training and grad return a
        3-tuple, inference an array)."""
        shape = instr.shape
        if instr.opcode != "batch-norm-inference":
            if not isinstance(shape, TupleShape) or len(shape.elements) != 3:
                raise Unsupported(f"{instr.opcode} shape")
            shape = shape.elements[0]
        et = scalar_type(shape, rank0=False)
        if len(ops) != arity or any(t != et for t in op_types):
            raise Unsupported(f"{instr.opcode} types")
        operands = [self.real_operand(o, t) for o, t in zip(ops, op_types)]
        return et, operands, self.f64_fn("divide"), self.f64_fn("sqrt")

    @form("batch-norm-inference", stage=ONE_ELEMENT)
    def batch_norm_inference(self, instr, ops, op_types):
        """One element: ``(x - mean) x (1 / sqrt(variance + epsilon) x scale) + offset``
        in f64, rounded once (the CPU's order of operations)."""
        et, (x, scale, offset, mean, var), div, sqrt = self.batch_norm_operands(instr, ops,
                                                                                op_types, 5)
        inv = self.line(f"{div}(1.0, {sqrt}({var} + {self.epsilon(instr, et)}))")
        y = self.line(f"({x} - {mean}) * ({inv} * {scale}) + {offset}")
        return self.line(self.store(y, et)), et

    @form("batch-norm-training", stage=ONE_ELEMENT)
    def batch_norm_training(self, instr, ops, op_types):
        """One element: mean ``0 + x`` (a sum from +0), centred ``x - mean``, variance
        ``centred^2``, output ``centred x (1 / sqrt(var + epsilon) x scale) + offset`` in
        f64, each rounded once: ``(output, mean, variance)``."""
        et, (x, scale, offset), div, sqrt = self.batch_norm_operands(instr, ops, op_types, 3)
        mean = self.line(f"{x} + 0.0")  # a mean is a sum from +0: -0 gives +0
        centred = self.line(f"{x} - {mean}")
        var = self.line(f"{centred} * {centred}")
        inv = self.line(f"{div}(1.0, {sqrt}({var} + {self.epsilon(instr, et)}))")
        y = self.line(f"{centred} * ({inv} * {scale}) + {offset}")
        out = [self.line(self.store(v, et)) for v in (y, mean, var)]
        return out, [et, et, et]

    @form("scaled-dot", stage=ONE_ELEMENT)
    def scaled_dot(self, instr, ops, op_types):
        """One-element real operands and scales (integers and pred by value): each operand
        exactly in f64 times its scale in f64 (a rank-0 scale is 1: the CPU ignores its
        value), then the product of the two by the dot rules of f64 operands (``product``:
        a sum from +0, rounded once; integer and pred results convert the f64 values),
        float operands with an integer result through f32 (``integer_result_in_f32``)."""
        from hloref.types import F32, F64
        et = scalar_type(instr.shape, rank0=False)
        if len(ops) != 4 or any(isinstance(t, list) or type_class(t) not in
                                ("f32", "f64", "narrow", "sint", "uint", "pred")
                                for t in op_types):
            raise Unsupported("scaled-dot operands")
        scaled = []
        for k in (0, 1):
            x, s = (self.convert_value(ops[j], op_types[j], F64) for j in (k, k + 2))
            rank, srank = instr.operands[k].shape.rank, instr.operands[k + 2].shape.rank
            if srank == 0:  # the CPU's rule: a rank-0 scale is 1
                scaled.append(x)
            elif srank != rank:  # the CPU's error (it runs the computation)
                raise HloEvalError(f"scaled-dot: scale of rank {srank} for an operand of "
                                   f"rank {rank}")
            else:
                scaled.append(self.line(f"{x} * {s}"))
        cls = type_class(et)
        if cls in ("sint", "uint") and all(t.is_float for t in op_types[:2]):
            wide = self.product(scaled, [F64, F64], F32)
            return self.convert_value(wide, F32, et), et
        if cls in ("sint", "uint"):  # the f64 values converted to the result type, multiplied
            conv = [self.convert_value(x, F64, et) for x in scaled]
            fn = self.bind("F", element_fn("multiply", et))
            return self.line(self.store(f"{fn}({self.load(conv[0], et)}, "
                                        f"{self.load(conv[1], et)})", et)), et
        return self.product(scaled, [F64, F64], et), et

    @form("batch-norm-grad", stage=ONE_ELEMENT)
    def batch_norm_grad(self, instr, ops, op_types):
        """One element (n = 1), the CPU's f64 arithmetic: ``ve = variance + epsilon``,
        ``inv = 1 / sqrt(ve)``, ``c = x - mean``, sums from +0 ``sdy = dy + 0``, ``sdc =
        dy x c + 0``; results ``(scale x inv) x (dy - sdy - c x (sdc / ve))``, ``sdc x
        inv``, ``sdy``, each rounded once."""
        et, (x, scale, mean, var, dy), div, sqrt = self.batch_norm_operands(instr, ops,
                                                                             op_types, 5)
        ve = self.line(f"{var} + {self.epsilon(instr, et)}")
        inv = self.line(f"{div}(1.0, {sqrt}({ve}))")
        c = self.line(f"{x} - {mean}")
        dyv = self.line(dy)
        sdy = self.line(f"{dyv} + 0.0")
        sdc = self.line(f"{dyv} * {c} + 0.0")
        k = self.line(f"{div}({scale} * {inv}, 1.0)")
        g = self.line(f"{k} * ({dyv} - {sdy} - {c} * {div}({sdc}, {ve}))")
        out = [self.line(self.store(v, et)) for v in (g, f"{sdc} * {inv}", sdy)]
        return out, [et, et, et]

    @form("ragged-dot", stage=ONE_ELEMENT)
    def ragged_dot(self, instr, ops, op_types):
        """One group, one element: the lhs element is in group 0 when the group size is
        at least 1 (its rows start at 0); the product by the dot rules of the lhs (or,
        outside the group, a zero of its type) and rhs; a ragged batch dimension only
        partitions the batch, so the product whatever the size."""
        et = scalar_type(instr.shape, rank0=False)
        if len(ops) != 3 or any(isinstance(t, list) for t in op_types):
            raise Unsupported("ragged-dot operands")
        if instr.attrs.get("algorithm") is not None:
            raise Unsupported("ragged-dot with an algorithm")
        lhs, rhs, sizes = ops
        st = op_types[2]
        if not st.is_integer:
            raise Unsupported("ragged-dot group sizes")
        (ragged,) = tuple(int(d) for d in instr.attrs.get("lhs_ragged_dims"))
        batch = [int(d) for d in (instr.attrs.get("lhs_batch_dims") or ())]
        if ragged not in batch:
            zero = self.bind("C", storage_constant(np.zeros(1), op_types[0]))
            lhs = self.line(f"({lhs} if {self.load(sizes, st)} >= 1 else {zero})")
        return self.product([lhs, rhs], op_types[:2], et), et

    @form("stochastic-convert", stage=ONE_ELEMENT)
    def stochastic_convert(self, instr, ops, op_types):
        """The CPU's rule (``bitwise_convert.stochastic_round``) on the operand's exact value
        and its random bits, wrapped to the signed result type."""
        from hloref.evaluator.bitwise_convert import check_stochastic_convert, stochastic_limits
        from .bitwise_convert import stochastic_round
        et = scalar_type(instr.shape, rank0=False)
        if len(ops) != 2 or any(isinstance(t, list) for t in op_types):
            raise Unsupported("stochastic-convert operands")
        src, rt = op_types
        if type_class(src) not in ("f32", "f64", "narrow"):
            raise Unsupported(f"stochastic-convert of {src.name}")
        check_stochastic_convert(src, rt, et)  # HloEvalError: the CPU's error
        lo, hi, f_lo, f_hi = stochastic_limits(src, et)
        fn = self.bind("F", stochastic_round)
        consts = [self.bind("C", c) for c in (np.float64(2.0 ** src.bits), np.float64(f_lo),
                                               np.float64(f_hi), np.int64(lo), np.int64(hi))]
        args = ", ".join([self.real_operand(ops[0], src), self.load(ops[1], rt)] + consts)
        return self.line(self.store(f"{fn}({args})", et)), et
