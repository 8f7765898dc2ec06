"""Device forms of random numbers in a compiled computation (registered with
``gpu/computation_emitter.py``): ``rng`` (a counter-based draw per call, ``gpu/rng.py``;
the CPU's draws come from its stream in call order: both implementation-defined, both
from the written distribution), rng-bit-generator of one element of bits (the CPU's
generator of one counter, bit for bit; its ``u64[2]``/``u64[3]`` state a small array
value), and rng-get-and-update-state (its ``u64[2]`` value a small array value), read at
a static site with the call index or through the serial mode's state channel
(``gpu/computation.py`` explains both).
"""

from __future__ import annotations

import zlib

import numpy as np
from numba import cuda

from . import config
from .computation_emitter import ELEMENT, WHOLE, form
from .computation_values import Unsupported, VecType, scalar_type, vec_shape
from .device import type_class, type_params

__all__ = ["RngForms"]


class RngForms:
    """The emitter's forms of rng, rng-bit-generator and rng-get-and-update-state."""

    @form("rng", stage=ELEMENT)
    def rng(self, instr, ops, op_types, et):
        """A draw of ``rng`` (``gpu/rng.py``: a Philox counter per draw, from the thread,
        its draw count and the instruction's site number), by the CPU's rules for the
        distribution; types the CPU rejects (pred, complex, integer normals) stay its."""
        from .rng import site_normal, site_uniform_float, site_uniform_int
        dist = str(instr.attrs.get("distribution"))
        cls = type_class(et)
        if len(ops) != 2 or any(t != et for t in op_types):
            raise Unsupported("rng operands")
        if cls not in ("sint", "uint", "f32", "f64", "narrow"):
            raise Unsupported(f"rng of {et.name}")
        if dist == "rng_uniform":
            make = site_uniform_int if et.is_integer else site_uniform_float
        elif dist == "rng_normal" and et.is_float:
            make = site_normal
        else:
            raise Unsupported(f"rng {dist} of {et.name}")
        if "RNG_COUNTS" not in self.ns:
            slots = max(1, int(config.MAX_BLOCKS) * int(config.THREADS_PER_BLOCK))
            self.ns["RNG_COUNTS"] = cuda.to_device(np.zeros(slots, np.uint64))
        site = zlib.crc32(f"{self.name}/{self.rng_sites}".encode()) & 0x7FFFFFFF
        self.rng_sites += 1
        fn = self.bind("F", make(cls))
        a, b = (self.load(x, et) for x in ops)
        return self.line(f"{fn}({a}, {b}, RNG_COUNTS, {site}, {self.bind('P', type_params(et))})")

    @form("rng-get-and-update-state", stage=WHOLE)
    def rng_state(self, instr, ops, op_types):
        """rng-get-and-update-state as a small ``u64[2]`` ``[low, high]`` value. With a
        call index, at a site ``gpu/computation.py:_state_sites`` found: the state before
        the first call, plus the call index times one call's deltas, plus the deltas of this call's
        earlier sites (``gpu/rng.py``: ``state_at``). In the serial mode: the state
        before the op plus the deltas consumed so far, read from the state channel,
        this site's delta then added (``gpu/rng.py``: ``take_state``)."""
        from .rng import state_at, take_state
        vec = vec_shape(instr.shape)
        m = 2**64 - 1
        if self.serial:
            delta = instr.attrs.get("delta")
            if delta is None:
                raise Unsupported("rng-get-and-update-state without delta")
            if vec is None or vec.n != 2 or vec.et.name != "u64":
                raise Unsupported("rng-get-and-update-state shape")
            delta = int(str(delta)) % 2**128
            words = [self.bind("C", np.uint64(v)) for v in (delta & m, delta >> 64)]
            self.state_count += 1
            r = self.line(f"{self.bind('F', take_state)}(state_io, {', '.join(words)})")
            return (self.line(f"{r}[0]"), self.line(f"{r}[1]")), vec
        offset = None if self.state_sites is None else \
            self.state_sites.get((self.call_path, id(instr)))
        if offset is None:
            raise Unsupported("rng-get-and-update-state (the CPU's global state)")
        if vec is None or vec.n != 2 or vec.et.name != "u64":
            raise Unsupported("rng-get-and-update-state shape")
        words = [self.bind("C", np.uint64(v)) for v in (
            self.state_delta & m, self.state_delta >> 64, offset & m, offset >> 64)]
        r = self.line(f"{self.bind('F', state_at)}(state_k, state_lo, state_hi, "
                      f"{', '.join(words)})")
        return (self.line(f"{r}[0]"), self.line(f"{r}[1]")), vec

    @form("rng-bit-generator", stage=WHOLE, small_arrays=True)
    def rng_bit_generator(self, instr, ops, op_types):
        """One element of bits from a ``u64[2]``/``u64[3]`` state (a small array value):
        the CPU's generators of one counter (``gpu/rng.py``, compiled from
        ``evaluator/rng.py``), counter 0 of the state (ThreeFry: ``state[1]``; Philox: the
        128-bit ``(state[1], state[2])``, or ``(state[1], state[0])`` for two words),
        word 0 (64-bit results: words 0 and 1), the low bits as the result type; the new
        state advances the counter by the one counter used (128-bit carry for Philox)."""
        from hloref.evaluator.rng import bit_generator_algorithm, bit_generator_shapes
        from .bitwise_convert import from_bits
        from .rng import philox4x32, threefry2x32
        state_shape, out_shape = bit_generator_shapes(instr.shape)  # the CPU's type errors
        et = scalar_type(out_shape, rank0=False)
        (st,), (stype,) = ops, op_types
        if not isinstance(stype, VecType) or stype.et.name != "u64" or (
                state_shape is not None and state_shape.element_type.name != "u64"):
            raise Unsupported("rng-bit-generator state")
        alg = bit_generator_algorithm(instr.attrs.get("algorithm") or "rng_default", stype.n)
        u64 = self.bind("N", np.uint64)
        m, s32, one = (self.bind("C", np.uint64(v)) for v in (0xFFFFFFFF, 32, 1))
        key = st[0]
        k0, k1 = f"{key} & {m}", f"{key} >> {s32}"
        if alg == "rng_three_fry":
            words = self.line(f"{self.bind('F', threefry2x32)}({st[1]}, {k0}, {k1})")
            new = [key, self.line(f"{u64}({st[1]} + {one})")]
        else:
            lo, hi = st[1], (st[2] if stype.n == 3 else st[0])
            words = self.line(f"{self.bind('F', philox4x32)}({lo}, {hi}, {k0}, {k1})")
            new_lo = self.line(f"{u64}({lo} + {one})")
            new = [key, new_lo]
            if stype.n == 3:
                new.append(self.line(f"({u64}({hi} + {one}) if {new_lo} < {lo} else {hi})"))
        bits = f"({words}[0] | ({words}[1] << {s32}))" if et.bits == 64 else f"{words}[0]"
        put = self.bind("F", from_bits(et))
        value = self.line(f"{put}({bits}, {self.bind('P', type_params(et))})")
        if state_shape is None:
            return value, et
        return [tuple(new), value], [stype, et]
