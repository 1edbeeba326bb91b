"""Wide loads and stores: four 4-byte elements in one 16-byte instruction, CUDA C's ``float4``.

Numba has no ``float4`` arrays, and it does not merge neighbouring loads into a vector load (it
cannot prove the address is 16-byte aligned), so ``a[i]``, ``a[i + 1]``, ``a[i + 2]``, ``a[i + 3]`` stay
four ``ld.global.f32``. These functions are the one instruction a CUDA C kernel gets from
``reinterpret_cast<float4*>``:

    from course import cuda, wide
    x0, x1, x2, x3 = wide.load4(a, i)             # a[i : i + 4] of a 1-D array: ld.global.v4.f32
    x0, x1, x2, x3 = wide.load4(tile, r, c)       # tile[r, c : c + 4] of a C-contiguous 2-D array
    wide.store4(out, i, (y0, y1, y2, y3))         # st.global.v4.f32 (st.shared.v4 on shared memory)

They work on kernel arguments and shared arrays of any 4-byte type (float32, int32, uint32). The
address must be a multiple of 16 bytes: the element index along the last axis a multiple of 4, and
(for 2-D) each row a multiple of 4 elements long. A shared array must be declared
``cuda.shared.array(shape, float32, alignment=16)``: Numba aligns shared arrays to their element
size only, so without it the array may start anywhere on a 4-byte boundary (the simulator raises).
On a GPU a misaligned wide access stops the kernel ("misaligned address") and the context with it;
the simulator raises ``MisalignedAccess`` naming the thread, the array and the index, and checks
bounds and races element by element. The traffic recorder counts one access of 16 bytes a lane
(``course.traffic``), as Nsight Compute would.

On the GPU (and for ``course.compiler``) each function is a Numba intrinsic: it takes the element's
address, casts it to a pointer to a 4-vector and loads or stores it with 16-byte alignment, which
LLVM lowers to one ``ld.v4`` / ``st.v4`` in the array's address space.
"""

from __future__ import annotations

from course import DEVICE

WIDTH = 4  # elements an access: 16 bytes of a 4-byte type

if DEVICE.kind == "sim":
    from course import simulator as _simulator

    def load4(array, *index):
        """``array[..., j : j + 4]`` from the index (row, ..., j) on, as a tuple of four values."""
        return _simulator.vector_access(array, index if len(index) > 1 else index[0], WIDTH)

    def store4(array, *index_and_values):
        """Store four values (a tuple, the last argument) at ``array[..., j : j + 4]``."""
        *index, values = index_and_values
        _simulator.vector_access(array, tuple(index) if len(index) > 1 else index[0], WIDTH, tuple(values))

else:
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.cuda.extending import intrinsic

    def _check(array, index):
        if not isinstance(array, types.Array) or array.dtype.bitwidth != 32:
            raise TypeError(f"a 16-byte access needs an array of a 4-byte type, got {array}")
        if array.ndim > 1 and array.layout != "C":
            raise TypeError(f"a 16-byte access needs a C-contiguous array, got {array}")
        if len(index) != array.ndim or not all(isinstance(i, types.Integer) for i in index):
            raise TypeError(f"a 16-byte access on {array} needs {array.ndim} integer indices, got {index}")

    def _vector_pointer(context, builder, aryty, ary, index_types, indices):
        ary = context.make_array(aryty)(context, builder, ary)
        idx = [context.cast(builder, v, t, types.intp) for v, t in zip(indices, index_types)]
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, idx, wraparound=False)
        vector = ir.VectorType(context.get_value_type(aryty.dtype), WIDTH)
        return builder.bitcast(ptr, vector.as_pointer()), vector

    @intrinsic
    def load4(typingctx, array, *index):
        """``array[..., j : j + 4]`` from the index (row, ..., j) on, as a tuple of four values."""
        _check(array, index)
        sig = types.UniTuple(array.dtype, WIDTH)(array, types.StarArgTuple.from_types(index))

        def codegen(context, builder, sig, args):
            indices = cgutils.unpack_tuple(builder, args[1])
            ptr, _ = _vector_pointer(context, builder, sig.args[0], args[0], index, indices)
            vec = builder.load(ptr, align=16)
            lanes = [builder.extract_element(vec, ir.Constant(ir.IntType(32), j)) for j in range(WIDTH)]
            return context.make_tuple(builder, sig.return_type, lanes)

        return sig, codegen

    @intrinsic
    def store4(typingctx, array, *index_and_values):
        """Store four values (a tuple, the last argument) at ``array[..., j : j + 4]``."""
        *index, values = index_and_values
        _check(array, tuple(index))
        if not isinstance(values, types.BaseTuple) or len(values) != WIDTH:
            raise TypeError(f"store4 takes a tuple of {WIDTH} values last, got {values}")
        sig = types.void(array, types.StarArgTuple.from_types(index_and_values))

        def codegen(context, builder, sig, args):
            aryty = sig.args[0]
            *indices, vals = cgutils.unpack_tuple(builder, args[1])
            ptr, vector = _vector_pointer(context, builder, aryty, args[0], index, indices)
            vec = ir.Constant(vector, ir.Undefined)
            for j in range(WIDTH):
                v = context.cast(builder, builder.extract_value(vals, j), values[j], aryty.dtype)
                vec = builder.insert_element(vec, v, ir.Constant(ir.IntType(32), j))
            builder.store(vec, ptr, align=16)
            return context.get_dummy_value()

        return sig, codegen


__all__ = ["WIDTH", "load4", "store4"]
