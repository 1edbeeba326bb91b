"""Reading a word that another block writes while this one waits for it: a relaxed load, not an atomic.

A single-pass scan's look-back (day 29, and days 31 and 38 that reuse it) spins on status words that
other blocks publish. Each time round the spin must really load again: a plain ``a[j]`` may be read
once and kept in a register (the compiler sees no reason for it to change), or served from this SM's
L1, which no other SM's write updates. An atomic read (``cuda.atomic.add(a, j, 0)``) is always fresh,
but it is a read-modify-write: the L2 slice that holds the word performs it, one at a time, queued with
every other warp polling the same words and with the publishing block's own atomic.

``load_relaxed(a, j)`` is the load CUB's look-back polls with: PTX ``ld.relaxed.gpu`` (the memory
model's *relaxed* order at *gpu* scope), an ordinary load from L2, the GPU's point of coherence, never
from L1, never merged with an earlier one, never moved out of a loop (the inline assembly is volatile
to LLVM). A naturally aligned 4- or 8-byte load is single-copy atomic: it sees a word published by
one atomic exchange whole or not at all, which is all a look-back needs when flag and value travel in
one word. It orders nothing else: a reader that then reads *other* data the publisher wrote needs an
acquire (or a fence) as well.

    from course import flags
    word = flags.load_relaxed(status, j)        # status: a 1-D array of a 4- or 8-byte integer type

In the simulator it is a plain read: blocks run one at a time there, so every predecessor a look-back
reads has published already.
"""

from __future__ import annotations

from course import DEVICE

if DEVICE.kind == "sim":

    def load_relaxed(array, index):
        """``array[index]`` as another block last wrote it (a plain read: the simulator runs blocks one
        at a time)."""
        return array[index]

else:
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.cuda.extending import intrinsic

    _CONSTRAINT = {32: "=r", 64: "=l"}

    @intrinsic
    def load_relaxed(typingctx, array, index):
        """``array[index]`` by ``ld.relaxed.gpu``: fresh from L2 at every call (see the module's notes)."""
        if (not isinstance(array, types.Array) or array.ndim != 1 or not isinstance(array.dtype, types.Integer)
                or array.dtype.bitwidth not in _CONSTRAINT):
            raise TypeError(f"load_relaxed reads a 1-D array of a 4- or 8-byte integer type, got {array}")
        if not isinstance(index, types.Integer):
            raise TypeError(f"load_relaxed takes one integer index, got {index}")
        sig = array.dtype(array, index)

        def codegen(context, builder, sig, args):
            aryty, idxty = sig.args
            ary = context.make_array(aryty)(context, builder, args[0])
            idx = context.cast(builder, args[1], idxty, types.intp)
            ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [idx], wraparound=False)
            bits = aryty.dtype.bitwidth
            value = context.get_value_type(aryty.dtype)
            # Generic addressing (no .global): a Numba array's data pointer is a generic pointer.
            load = ir.InlineAsm(ir.FunctionType(value, [ptr.type]), f"ld.relaxed.gpu.b{bits} $0, [$1];",
                                f"{_CONSTRAINT[bits]},l,~{{memory}}", side_effect=True)
            return builder.call(load, [ptr])

        return sig, codegen


__all__ = ["load_relaxed"]
