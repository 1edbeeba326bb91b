"""Wide loads and stores: four 4-byte elements in one 16-byte instruction, CUDA C's ``float4``.

Numba has no ``float4`` arrays, and it does not merge neighbouring loads into a vector load (it
cannot prove the address is 16-byte aligned), so ``a[i]``, ``a[i + 1]``, ``a[i + 2]``, ``a[i + 3]`` stay
four ``ld.global.f32``. These functions are the one instruction a CUDA C kernel gets from
``reinterpret_cast<float4*>``:

    from course import cuda, wide
    x0, x1, x2, x3 = wide.load4(a, i)             # a[i : i + 4] of a 1-D array: ld.global.v4.f32
    x0, x1, x2, x3 = wide.load4(tile, r, c)       # tile[r, c : c + 4] of a C-contiguous 2-D array
    wide.store4(out, i, (y0, y1, y2, y3))         # st.global.v4.f32 (st.shared.v4 on shared memory)
    h = wide.load8(half_row, j)                   # eight float16 in one 16-byte load (wide.store8 too)

load4/store4 take arrays of a 4-byte type (float32, int32, uint32), load8/store8 of a 2-byte type
(float16, int16, uint16): the same 16 bytes. The address must be a multiple of 16 bytes: the element
index along the last axis a multiple of 4 (of 8 for load8), and (for 2-D) each row a multiple of
that many elements long. A shared array must be declared ``cuda.shared.array(shape, float32,
alignment=16)``: Numba aligns shared arrays to their element size only, so without it the array may
start anywhere on a 4-byte boundary (the simulator raises). On a GPU a misaligned wide access stops
the kernel ("misaligned address") and the context with it; the simulator raises ``MisalignedAccess``
naming the thread, the array and the index, and checks bounds and races element by element. The
traffic recorder counts one access of 16 bytes a lane (``course.traffic``), as Nsight Compute would.

On the GPU (and for ``course.compiler``) each function is a Numba intrinsic: it takes the element's
address, casts it to a pointer to a 4-vector (of the element type, or of 32-bit words holding two
2-byte elements each) and loads or stores it with 16-byte alignment, which LLVM lowers to one
``ld.v4`` / ``st.v4`` in the array's address space.
"""

from __future__ import annotations

from course import DEVICE

WIDTH = 4  # elements an access: 16 bytes of a 4-byte type (load4 / store4)
WIDTH16 = 8  # elements an access: 16 bytes of a 2-byte type such as float16 (load8 / store8)

if DEVICE.kind == "sim":
    from course import simulator as _simulator

    def _at(index):
        return tuple(index) if len(index) > 1 else index[0]

    def load4(array, *index):
        """``array[..., j : j + 4]`` from the index (row, ..., j) on, as a tuple of four values."""
        return _simulator.vector_access(array, _at(index), WIDTH)

    def store4(array, *index_and_values):
        """Store four values (a tuple, the last argument) at ``array[..., j : j + 4]``."""
        *index, values = index_and_values
        _simulator.vector_access(array, _at(index), WIDTH, tuple(values))

    def load8(array, *index):
        """``array[..., j : j + 8]`` of a 2-byte type (float16), as a tuple of eight values."""
        return _simulator.vector_access(array, _at(index), WIDTH16)

    def store8(array, *index_and_values):
        """Store eight values (a tuple, the last argument) at ``array[..., j : j + 8]`` (2-byte type)."""
        *index, values = index_and_values
        _simulator.vector_access(array, _at(index), WIDTH16, tuple(values))

else:
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.cuda.extending import intrinsic

    _I16, _I32 = ir.IntType(16), ir.IntType(32)

    def _check(array, index, bits):
        if not isinstance(array, types.Array) or getattr(array.dtype, "bitwidth", 0) != bits:
            raise TypeError(f"a 16-byte access of {128 // bits} elements needs an array of a {bits // 8}-byte "
                            f"type, got {array}")
        if array.ndim > 1 and array.layout != "C":
            raise TypeError(f"a 16-byte access needs a C-contiguous array, got {array}")
        if len(index) != array.ndim or not all(isinstance(i, types.Integer) for i in index):
            raise TypeError(f"a 16-byte access on {array} needs {array.ndim} integer indices, got {index}")

    def _pointer(context, builder, aryty, ary, index_types, indices, vector):
        ary = context.make_array(aryty)(context, builder, ary)
        idx = [context.cast(builder, v, t, types.intp) for v, t in zip(indices, index_types)]
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, idx, wraparound=False)
        return builder.bitcast(ptr, vector.as_pointer())

    def _lane(j):
        return ir.Constant(_I32, j)

    def _load(array, index, count):
        """The intrinsic's signature and code: one 16-byte load, ``count`` elements out. 2-byte types
        are loaded as four 32-bit words and split (a vector of eight halves would be lowered to two
        8-byte loads)."""
        bits = 128 // count
        _check(array, index, bits)
        sig = types.UniTuple(array.dtype, count)(array, types.StarArgTuple.from_types(index))

        def codegen(context, builder, sig, args):
            elt = context.get_value_type(sig.args[0].dtype)
            vector = ir.VectorType(elt if bits == 32 else _I32, 4)
            ptr = _pointer(context, builder, sig.args[0], args[0], index, cgutils.unpack_tuple(builder, args[1]),
                           vector)
            vec = builder.load(ptr, align=16)
            words = [builder.extract_element(vec, _lane(j)) for j in range(4)]
            if bits == 32:
                lanes = words
            else:
                lanes = []
                for w in words:  # little-endian: element 2j in the low half of word j
                    lanes.append(builder.bitcast(builder.trunc(w, _I16), elt))
                    lanes.append(builder.bitcast(builder.trunc(builder.lshr(w, ir.Constant(_I32, 16)), _I16), elt))
            return context.make_tuple(builder, sig.return_type, lanes)

        return sig, codegen

    def _store(array, index_and_values, count):
        *index, values = index_and_values
        bits = 128 // count
        _check(array, tuple(index), bits)
        if not isinstance(values, types.BaseTuple) or len(values) != count:
            raise TypeError(f"a 16-byte store of {count} elements takes a tuple of {count} values last, got {values}")
        sig = types.void(array, types.StarArgTuple.from_types(index_and_values))

        def codegen(context, builder, sig, args):
            aryty = sig.args[0]
            elt = context.get_value_type(aryty.dtype)
            *indices, vals = cgutils.unpack_tuple(builder, args[1])
            vector = ir.VectorType(elt if bits == 32 else _I32, 4)
            ptr = _pointer(context, builder, aryty, args[0], index, indices, vector)
            lanes = [context.cast(builder, builder.extract_value(vals, j), values[j], aryty.dtype)
                     for j in range(count)]
            if bits != 32:
                halves = [builder.zext(builder.bitcast(v, _I16), _I32) for v in lanes]
                lanes = [builder.or_(halves[2 * j], builder.shl(halves[2 * j + 1], ir.Constant(_I32, 16)))
                         for j in range(4)]
            vec = ir.Constant(vector, ir.Undefined)
            for j in range(4):
                vec = builder.insert_element(vec, lanes[j], _lane(j))
            builder.store(vec, ptr, align=16)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def load4(typingctx, array, *index):
        """``array[..., j : j + 4]`` from the index (row, ..., j) on, as a tuple of four values."""
        return _load(array, index, WIDTH)

    @intrinsic
    def store4(typingctx, array, *index_and_values):
        """Store four values (a tuple, the last argument) at ``array[..., j : j + 4]``."""
        return _store(array, index_and_values, WIDTH)

    @intrinsic
    def load8(typingctx, array, *index):
        """``array[..., j : j + 8]`` of a 2-byte type (float16), as a tuple of eight values."""
        return _load(array, index, WIDTH16)

    @intrinsic
    def store8(typingctx, array, *index_and_values):
        """Store eight values (a tuple, the last argument) at ``array[..., j : j + 8]`` (2-byte type)."""
        return _store(array, index_and_values, WIDTH16)


__all__ = ["WIDTH", "WIDTH16", "load4", "load8", "store4", "store8"]
