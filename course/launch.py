"""What every host function does around its kernel: validate inputs, move arrays, size the grid.

A day's host function accepts NumPy arrays (copied to the device, result copied back) or device
arrays (Numba device arrays, or anything with ``__cuda_array_interface__`` such as CuPy arrays: the
result stays on the device, which is how ``bench`` times kernels without PCIe transfers).

Outputs come from :func:`empty`, which fills them with poison (NaN, or a sentinel for integers)
unless poisoning is switched off, so an element a kernel forgot to write can never look right.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import numpy as np

from course import ON_GPU, cuda

_poison = True


def is_device_array(a) -> bool:
    """A Numba device array (the simulator's stand-in too) or anything with __cuda_array_interface__."""
    if isinstance(a, np.ndarray):
        return False
    return hasattr(a, "copy_to_host") or hasattr(a, "__cuda_array_interface__")


def _describe(a) -> str:
    kind = "NumPy array" if isinstance(a, np.ndarray) else type(a).__name__
    return f"{kind} of shape {tuple(a.shape)} and dtype {np.dtype(a.dtype).name}"


def _is_c_contiguous(a) -> bool:
    if isinstance(a, np.ndarray):
        return a.flags.c_contiguous
    if hasattr(a, "is_c_contiguous"):
        return a.is_c_contiguous()
    flags = getattr(a, "flags", None)
    if flags is not None:
        return bool(flags["C_CONTIGUOUS"] if isinstance(flags, dict) else flags.c_contiguous)
    strides = a.__cuda_array_interface__.get("strides")
    return strides is None


def check_array(name: str, a, *, dtype=None, ndim: int | None = None, shape: tuple | None = None,
                contiguous: bool = True) -> None:
    """Raise ValueError, saying what was expected and what was given, unless ``a`` fits."""
    if not (isinstance(a, np.ndarray) or is_device_array(a)):
        raise ValueError(f"{name}: expected a NumPy or device array, got {type(a).__name__}")
    if dtype is not None:
        allowed = tuple(np.dtype(d) for d in (dtype if isinstance(dtype, (tuple, list)) else (dtype,)))
        if np.dtype(a.dtype) not in allowed:
            want = " or ".join(d.name for d in allowed)
            raise ValueError(f"{name}: expected dtype {want}, got {_describe(a)}")
    if ndim is not None and len(a.shape) != ndim:
        raise ValueError(f"{name}: expected a {ndim}-D array, got {_describe(a)}")
    if shape is not None:
        if len(shape) != len(a.shape) or any(s is not None and s != g for s, g in zip(shape, a.shape)):
            want = "(" + ", ".join("any" if s is None else str(s) for s in shape) + ")"
            raise ValueError(f"{name}: expected shape {want}, got {_describe(a)}")
    if contiguous and not _is_c_contiguous(a):
        raise ValueError(f"{name}: expected a C-contiguous array, got a strided view ({_describe(a)}); "
                         "pass np.ascontiguousarray(...)")


def _canonical_strides(a: np.ndarray) -> np.ndarray:
    """A C-contiguous array with the strides NumPy would give a fresh one (same memory, no copy). A
    length-1 axis may carry any stride (x[None, :] has stride 0 there) and NumPy still calls the array
    C-contiguous; a device copy keeps those strides, and Numba's reshape of it then fails."""
    if not a.flags.c_contiguous or a.ndim < 2:
        return a
    canonical = tuple(int(np.prod(a.shape[i + 1:], dtype=np.int64)) * a.itemsize for i in range(a.ndim))
    if a.strides == canonical:
        return a
    return np.lib.stride_tricks.as_strided(a, a.shape, canonical)


def to_device(*arrays):
    """Device views of the arguments (NumPy arrays are copied over). Returns a tuple."""
    out = []
    for a in arrays:
        if isinstance(a, np.ndarray):
            out.append(cuda.to_device(_canonical_strides(a)))
        elif hasattr(a, "__cuda_array_interface__") and not hasattr(a, "copy_to_host"):
            out.append(cuda.as_cuda_array(a))  # e.g. CuPy: zero-copy view
        else:
            out.append(a)
    return tuple(out)


def on_host(*arrays) -> bool:
    """True when the caller passed NumPy arrays, so results go back as NumPy arrays."""
    return any(isinstance(a, np.ndarray) for a in arrays)


def result(out, *inputs):
    """``out`` (a Numba or CuPy device array) as the caller expects it: a NumPy copy when the inputs
    were NumPy arrays."""
    if not on_host(*inputs):
        return out
    return out.copy_to_host() if hasattr(out, "copy_to_host") else out.get()


def poison_value(dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return np.nan
    if dtype.kind in "iu":
        return np.iinfo(dtype).max - 0x5A  # unlikely to be a right answer
    if dtype.kind == "b":
        return True
    raise ValueError(f"no poison value for dtype {dtype}")


def poison(dev_array) -> None:
    """Overwrite a device array with poison."""
    value = poison_value(dev_array.dtype)
    if ON_GPU:
        try:  # one fill kernel on the device instead of a host array copied over
            import cupy

            cupy.asarray(dev_array).fill(value)
            return
        except Exception:  # no usable CuPy: copy the poison from the host
            pass
    dev_array.copy_to_device(np.full(dev_array.shape, value, dtype=dev_array.dtype))


def empty(shape, dtype):
    """A device output array, poisoned unless :func:`no_poison` is in effect."""
    out = cuda.device_array(shape, dtype=np.dtype(dtype))
    if _poison and out.size:
        poison(out)
    return out


def pooled_empty(shape, dtype):
    """An output array for a host function whose own Python is timed with its kernels (it reads a count
    back, so `make bench` times it by the wall clock) and which launches through course.prepared: on a
    GPU a CuPy array from the pool, where allocating and later slicing it cost ~2 us each against 15 and
    28 us for a Numba device array (tools/launch_overhead.py); in the simulator :func:`empty`. Poisoned
    unless :func:`no_poison` is in effect. The caller gets a CuPy array (or a slice of one) back: a
    device array like any other (``__cuda_array_interface__``), and :func:`result` copies it to NumPy
    for NumPy callers."""
    out = scratch(shape, dtype)  # in the simulator empty(): poisoned already
    if ON_GPU and _poison and out.size:
        poison(out)
    return out


def scratch(shape, dtype):
    """A device array a host function uses and drops (status words, counters), never returns. On a GPU a
    CuPy array (a pool lookup, ~2 us of Python, where a Numba device array costs ~15 us: measured by
    tools/launch_overhead.py), for launches through course.prepared, which read CuPy and Numba arrays
    alike in place; in the simulator :func:`empty`. Its contents are undefined (poisoned in the
    simulator): clear it before use."""
    if not ON_GPU:
        return empty(shape, dtype)
    import cupy  # on a GPU the course allocates through CuPy's pool (course.gpu_memory)

    return cupy.empty(shape, dtype=np.dtype(dtype))


def zero(*arrays) -> None:
    """Zero device arrays in place, asynchronously, in order with the launches around the call: a CuPy
    array by one ``cudaMemsetAsync`` on the current stream (~2 us of host, where a prepared launch of a
    clearing kernel costs ~10), a Numba device array by the driver's memset; in the simulator a copy of
    zeros. For status words and ticket counters that must start at 0 at every launch."""
    for a in arrays:
        cupy_array = getattr(getattr(a, "data", None), "ptr", None) is not None
        if not (a.flags.c_contiguous if cupy_array else a.is_c_contiguous()):
            raise ValueError(f"launch.zero: expected a C-contiguous device array, got {_describe(a)}")
        nbytes = a.size * a.dtype.itemsize
        if not nbytes:
            continue
        if not ON_GPU:
            a.copy_to_device(np.zeros(a.shape, dtype=a.dtype))
        elif cupy_array:
            a.data.memset_async(0, nbytes)
        else:
            from numba.cuda.cudadrv import driver

            driver.device_memset(a, 0, nbytes)


def pinned_empty(shape, dtype) -> np.ndarray:
    """A host (NumPy) array in page-locked memory, for copies that run asynchronously. On a GPU it comes
    from CuPy's pinned memory pool (``cupyx.empty_pinned``): when the array is dropped its pages go back
    to the pool, so a function called again gets locked memory for a lookup instead of allocating and
    locking it anew (tens of milliseconds for 256 MB). In the simulator, where every copy is
    synchronous, a plain NumPy array. Contents undefined (poisoned while poisoning is on)."""
    dtype = np.dtype(dtype)
    if ON_GPU:
        import cupyx

        out = cupyx.empty_pinned(shape, dtype=dtype)
    else:
        out = np.empty(shape, dtype=dtype)
    if _poison and out.size:
        out.fill(poison_value(dtype))
    return out


def pinned_copy(a: np.ndarray) -> np.ndarray:
    """A copy of host array ``a`` in page-locked memory (:func:`pinned_empty`)."""
    out = pinned_empty(a.shape, a.dtype)
    out[...] = a
    return out


def is_pinned(a) -> bool:
    """Whether NumPy array ``a`` lies in page-locked memory (allocated locked, or registered with
    ``cuda.pinned``), where an asynchronous copy reads it by DMA. False for pageable memory, for
    anything that is not a NumPy array, and always in the simulator."""
    if not ON_GPU or not isinstance(a, np.ndarray) or a.size == 0:
        return False
    import cupy

    # cudaPointerGetAttributes: type 0 is unregistered (pageable) host memory, 1 locked host memory
    attrs = cupy.cuda.runtime.pointerGetAttributes(a.ctypes.data)
    return attrs.type == cupy.cuda.runtime.memoryTypeHost


@contextlib.contextmanager
def no_poison() -> Iterator[None]:
    """Skip poisoning outputs (benchmarks: the fill would be timed with the kernel)."""
    global _poison
    saved, _poison = _poison, False
    try:
        yield
    finally:
        _poison = saved


def blocks(n: int, threads_per_block: int) -> int:
    """Enough blocks of ``threads_per_block`` to give each of ``n`` items a thread (at least 1)."""
    return max(1, math.ceil(n / threads_per_block))


def sm_count() -> int:
    """Streaming multiprocessors on the device (1 in the simulator: it runs one block at a time)."""
    if not ON_GPU:
        return 1
    return cuda.get_current_device().MULTIPROCESSOR_COUNT


_RESIDENT: dict[tuple, int] = {}


def resident_blocks(kernel, threads_per_block: int, *args, dynamic_shared: int = 0, most: int = 32) -> int:
    """How many blocks of ``kernel``, launched with ``args``, one SM holds at once (the driver's
    occupancy calculator: registers a thread, shared memory a block, threads a block), at most ``most``.

    A grid-stride grid sized for more blocks an SM than fit does not run as one wave: the SM takes
    what fits, and the rest start as those finish, a second wave with the SM a fraction full and too
    few loads in flight to keep HBM busy. Size the grid with this instead of assuming a count.

    ``args`` are the launch's own (values do not matter, only their types): the kernel is compiled for
    them here if it has not been, the one compilation the launch would otherwise do. In the simulator
    (one block at a time) it returns ``most``."""
    if not ON_GPU:
        return most
    argtypes = tuple(kernel.typeof_pyval(a) for a in args)
    key = (kernel, argtypes, threads_per_block, dynamic_shared)
    if key not in _RESIDENT:
        compiled = kernel.compile(argtypes)  # the overload the launch picks for these types
        # The occupancy a cooperative launch may use: active blocks an SM times the SMs.
        _RESIDENT[key] = compiled.max_cooperative_grid_blocks(threads_per_block, dynamic_shared) // sm_count()
    return max(1, min(most, _RESIDENT[key]))


def grid_stride_blocks(n: int, threads_per_block: int, blocks_per_sm: int = 8) -> int:
    """A grid that fills the device once (a few blocks per SM), for grid-stride loops over ``n`` items."""
    return max(1, min(blocks(n, threads_per_block), sm_count() * blocks_per_sm))


def word_dtype(row_bytes: int) -> np.dtype:
    """The widest unsigned word (8, 4 or 2 bytes) that tiles a row of ``row_bytes`` bytes.

    Copy kernels move bytes, not values: one 8-byte load per lane moves four float16s, so a warp's
    request covers 256 bytes instead of 64 and the copy needs a quarter of the instructions."""
    for dtype in (np.uint64, np.uint32, np.uint16):
        if row_bytes % np.dtype(dtype).itemsize == 0:
            return np.dtype(dtype)
    return np.dtype(np.uint8)


def as_words(dev_array, rows: int):
    """A contiguous device array seen as (rows, words) of the widest word that tiles a row (no copy)."""
    row_bytes = dev_array.size * dev_array.dtype.itemsize // rows
    flat = dev_array.reshape(rows, dev_array.size // rows)
    return flat.view(word_dtype(row_bytes))
