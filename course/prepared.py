"""A Numba kernel compiled once for one signature, its launches' arguments flattened by hand.

``kernel[grid, block](*args)`` goes through Numba's dispatcher at every call: it types each argument
to pick (or compile) an overload, builds a view object for every array (a DLPack export for a CuPy
array), and converts them to the kernel's parameters one at a time. That is tens of microseconds of
Python a launch, more than a decode step's small kernels run on the GPU, and a serving engine issues a
few dozen of them a layer: its step is then bound by the host (day 90's lesson). ``prepare(kernel,
signature)`` does the typing once: it compiles the overload for ``signature`` ahead of any launch, and
each call ``prepared[grid, block](*args)`` only checks each argument against the signature (an
array's dtype, rank and, for a C-layout parameter, contiguity; a scalar's kind) and hands the driver
the parameters Numba would. An array parameter is seven fields and two per dimension, in this order:

    meminfo (0), parent (0), element count, item size, data pointer, shape..., strides in bytes...

A scalar is its C value (``ctypes.c_float`` for float32, ``ctypes.c_int32`` for int32, ...). Arrays
may be Numba device arrays or CuPy arrays, read in place: no view object is built. A NumPy array is
refused on a GPU (copy it over first, ``launch.to_device``): the dispatcher would copy it to the
device and back at every launch.

In the simulator the same checks run and the launch goes through the dispatcher, so what a prepared
launch computes is graded like any other launch; only its host cost is the GPU's concern. On a GPU,
``COURSE_PREPARED=0`` in the environment does the same (the checks, then the dispatcher's launch): to
measure what the prepared launch saves, or to rule it out.
"""

from __future__ import annotations

import ctypes
import os

import numpy as np

from course import ON_GPU

# Launch through the driver directly (on a GPU), or through Numba's dispatcher after the same checks.
DIRECT = ON_GPU and os.environ.get("COURSE_PREPARED", "1").strip() != "0"

# numba scalar type name -> what the driver takes for it (numba.cuda.dispatcher._Kernel._prepare_args)
_SCALARS = {
    "int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32, "int64": ctypes.c_int64,
    "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16, "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64,
    "float32": ctypes.c_float, "float64": ctypes.c_double,
    "float16": lambda v: ctypes.c_uint16(int(np.float16(v).view(np.uint16))),
    "bool": bool,
}


class _ArrayParam:
    __slots__ = ("dtype", "itemsize", "ndim", "c_layout", "text")

    def __init__(self, ty):
        self.dtype = np.dtype(str(ty.dtype))
        self.itemsize = self.dtype.itemsize
        self.ndim = ty.ndim
        if ty.layout not in ("C", "A"):
            raise ValueError(f"prepare: only C-contiguous ([..., ::1]) or any-layout ([:, :]) arrays, got {ty}")
        self.c_layout = ty.layout == "C"
        self.text = str(ty)


def parse_signature(signature: str) -> list:
    """The parameters of a kernel signature such as ``"void(float32[:, ::1], int32)"``: an _ArrayParam
    for each array, the ctypes constructor (a name, for messages: (name, make)) for each scalar."""
    from numba.core import sigutils, types

    args, ret = sigutils.normalize_signature(signature)
    if ret not in (None, types.none):
        raise ValueError(f"prepare: a kernel returns nothing, the signature says {ret}")
    params = []
    for ty in args:
        if isinstance(ty, types.Array):
            params.append(_ArrayParam(ty))
        elif str(ty) in _SCALARS:
            params.append((str(ty), _SCALARS[str(ty)]))
        else:
            raise ValueError(f"prepare: parameter type {ty} is not an array or a number")
    return params


def _geometry(a, name="kernel", i=0, p=None):
    """(data pointer, shape, strides in bytes, dtype) of a CuPy or Numba device array, read directly;
    ValueError naming argument i otherwise."""
    data = getattr(a, "data", None)
    ptr = getattr(data, "ptr", None)  # a CuPy array's MemoryPointer
    if ptr is None:
        if not hasattr(a, "gpu_data"):  # neither CuPy nor a Numba device array
            kind = "NumPy array" if isinstance(a, np.ndarray) else type(a).__name__
            hint = "; copy it over first (launch.to_device)" if isinstance(a, np.ndarray) else ""
            raise ValueError(f"{name}: argument {i}" + (f" ({p.text})" if p is not None else "")
                             + f": expected a device array (Numba or CuPy), got a {kind}{hint}")
        ptr = a.device_ctypes_pointer.value or 0
    return ptr, a.shape, a.strides, a.dtype


_POINTER: dict = {}  # array type -> how to read its data pointer, worked out at its first launch


def _cupy_pointer(a):
    return a.data.ptr


def _numba_pointer(a):
    return a.device_ctypes_pointer.value or 0


def _pointer_reader(a, name, i, p):
    """How to read the data pointer of arrays of a's type (CuPy's or Numba's), remembered for the type;
    ValueError naming argument i for anything else."""
    if getattr(getattr(a, "data", None), "ptr", None) is not None:
        read = _cupy_pointer
    elif hasattr(a, "gpu_data"):
        read = _numba_pointer
    else:
        _geometry(a, name, i, p)  # raises, saying what was given
    _POINTER[a.__class__] = read
    return read


def _c_contiguous(shape, strides, itemsize) -> bool:
    expected = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expected:
            return False
        expected *= n
    return True


def flatten(params, args, name: str = "kernel") -> list:
    """The driver's parameter list for ``args`` (see the module's docstring), after checking each against
    its parameter; ValueError naming the argument otherwise. (Written for the launch's hot path: a few
    attribute reads an array; the messages come from the slower helpers, only when a check fails.)"""
    if len(args) != len(params):
        raise ValueError(f"{name}: expected {len(params)} arguments, got {len(args)}")
    flat = []
    extend = flat.extend
    for i, p in enumerate(params):
        a = args[i]
        if p.__class__ is _ArrayParam:
            read = _POINTER.get(a.__class__) or _pointer_reader(a, name, i, p)
            ptr = read(a)
            shape, strides = a.shape, a.strides
            if a.dtype != p.dtype or len(shape) != p.ndim or (
                    p.c_layout and not _c_contiguous(shape, strides, p.itemsize)):
                check_array_param(name, i, p, shape, strides, a.dtype)
            extend((0, 0, a.size, p.itemsize, ptr))
            extend(shape)
            extend(strides)
        else:
            flat.append(_scalar(name, i, p, a))
    return flat


def check_array_param(name, i, p, shape, strides, dtype) -> None:
    if np.dtype(dtype) != p.dtype or len(shape) != p.ndim:
        raise ValueError(f"{name}: argument {i}: expected {p.text}, got a {len(shape)}-D {np.dtype(dtype).name} array")
    if p.c_layout and not _c_contiguous(shape, strides, p.dtype.itemsize):
        raise ValueError(f"{name}: argument {i}: expected a C-contiguous {p.text}, got strides {tuple(strides)}")


def _scalar(name, i, p, a):
    kind, make = p
    number = isinstance(a, (int, float, np.number)) and not isinstance(a, (bool, np.bool_))
    if not (number or (kind == "bool" and isinstance(a, (bool, np.bool_)))):
        raise ValueError(f"{name}: argument {i}: expected a {kind} scalar, got {type(a).__name__}")
    if kind.startswith(("int", "uint")) and not isinstance(a, (int, np.integer)):
        raise ValueError(f"{name}: argument {i}: expected an integer ({kind}), got {a!r}")
    return make(a)


class PreparedKernel:
    """``prepare(kernel, signature)``'s result: ``prepared[griddim, blockdim](*args)`` launches, as
    ``kernel[griddim, blockdim](*args)`` would for arguments of that signature."""

    def __init__(self, kernel, signature: str):
        self.kernel = kernel
        self.signature = signature
        self.params = parse_signature(signature)
        self.name = getattr(kernel, "__name__", None) or getattr(getattr(kernel, "py_func", None), "__name__", "kernel")
        self._launches: dict = {}
        self._cufunc = None
        if DIRECT:
            overload = kernel.compile(signature)  # the overload the dispatcher would pick: compiled now
            if getattr(overload, "debug", False) or getattr(overload, "extensions", None):
                raise ValueError(f"prepare({self.name}): a kernel compiled with debug=True or argument extensions "
                                 "needs the dispatcher's launch")
            self._overload = overload

    def __getitem__(self, config):
        if not isinstance(config, tuple) or len(config) not in (2, 3, 4):
            raise ValueError("prepared[griddim, blockdim] (optionally stream, dynamic shared bytes)")
        launch = self._launches.get(config)
        if launch is None:
            if len(self._launches) >= 1024:  # a server's grids follow its batch sizes: keep the memo bounded
                self._launches.clear()
            launch = self._launches[config] = _Launch(self, *config)
        return launch


class _Launch:
    __slots__ = ("prepared", "config", "stream", "call", "driver_launch")

    def __init__(self, prepared: PreparedKernel, griddim, blockdim, stream=0, sharedmem=0):
        self.prepared = prepared
        if not DIRECT:  # the simulator (or COURSE_PREPARED=0): the dispatcher's launch after the same checks,
            # configured at each call (the simulator's kernel[config] sets the grid on the kernel itself)
            self.call = (griddim, blockdim, stream, sharedmem)
            return
        from cuda.core import LaunchConfig, launch
        from numba.cuda._compat import CUDA_CORE_GE_1_0
        from numba.cuda.cudadrv import driver
        from numba.cuda.errors import normalize_kernel_dimensions

        griddim, blockdim = normalize_kernel_dimensions(griddim, blockdim)
        coop = bool(getattr(prepared._overload, "cooperative", False))
        kw = {"is_cooperative": coop} if CUDA_CORE_GE_1_0 else {"cooperative_launch": coop}
        self.config = LaunchConfig(grid=griddim, block=blockdim, shmem_size=sharedmem, **kw)
        self.stream = driver._to_core_stream(stream)
        self.call = None
        self.driver_launch = launch  # cuda.core's, which numba-cuda's own launch ends in

    def __call__(self, *args):
        p = self.prepared
        if self.call is not None:  # the simulator, or COURSE_PREPARED=0
            if ON_GPU:
                flatten(p.params, args, p.name)  # the same checks as the direct launch's
            else:
                _check_host_args(p, args)
            return p.kernel[self.call](*args)
        flat = flatten(p.params, args, p.name)
        if p._cufunc is None:
            p._cufunc = p._overload._codelibrary.get_cufunc().kernel  # loaded into this context once
        self.driver_launch(self.stream, self.config, p._cufunc, *flat)


def _check_host_args(p: PreparedKernel, args) -> None:
    """The simulator's side of flatten: the same checks on whatever arrays it runs on (NumPy included)."""
    if len(args) != len(p.params):
        raise ValueError(f"{p.name}: expected {len(p.params)} arguments, got {len(args)}")
    for i, (param, a) in enumerate(zip(p.params, args)):
        if isinstance(param, _ArrayParam):
            if not hasattr(a, "shape") or not hasattr(a, "dtype"):
                raise ValueError(f"{p.name}: argument {i} ({param.text}): expected an array, got {type(a).__name__}")
            strides = getattr(a, "strides", None)
            if strides is None:
                strides = np.empty(0, a.dtype).strides  # unreachable for the simulator's arrays
            check_array_param(p.name, i, param, tuple(a.shape), tuple(strides), a.dtype)
        else:
            _scalar(p.name, i, param, a)


_PREPARED: dict = {}


def prepare(kernel, signature: str) -> PreparedKernel:
    """The prepared form of ``kernel`` for ``signature`` (made once per pair, then reused)."""
    key = (kernel, signature)
    prepared = _PREPARED.get(key)
    if prepared is None:
        prepared = _PREPARED[key] = PreparedKernel(kernel, signature)
    return prepared
