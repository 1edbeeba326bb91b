"""Warp intrinsics and teaching checks for Numba's CUDA simulator.

Numba's simulator (``NUMBA_ENABLE_CUDASIM=1``) runs a kernel on the CPU, one block at a time, each
CUDA thread a Python thread. That runs most course kernels, but it lacks the warp intrinsics and it
quietly accepts bugs that a GPU punishes. ``install()`` (called by ``import course`` when there is no
GPU) patches the simulator in place. It adds:

Warp intrinsics, with the semantics of numba-cuda on a GPU
    ``cuda.shfl_sync``, ``shfl_up_sync``, ``shfl_down_sync``, ``shfl_xor_sync``, ``ballot_sync``,
    ``all_sync``, ``any_sync``, ``eq_sync``, ``match_any_sync``, ``match_all_sync``, ``activemask``,
    ``lanemask_lt`` and ``syncwarp``. A warp is 32 consecutive linear thread ids of the block (x
    fastest, then y, then z); the last warp of a block whose size is not a multiple of 32 is partial.
    The lanes named in the mask meet at a per-warp rendezvous; lanes that have exited no longer count,
    so a full mask works in a partial warp. As in numba-cuda, the shuffles take no ``width``: their
    lane argument is used modulo 32 (the hardware reads its low 5 bits), a shuffle from a lane outside
    the warp (up/down past its ends) returns the caller's own value, and so (the GPU leaves it
    undefined) does a shuffle from a lane that does not take part. Values are int32/int64/float32/
    float64 (Python ints and floats count as 64-bit) and come back in the caller's type. ``ballot_sync``
    and the ``match`` masks are int32, ``activemask`` and ``lanemask_lt`` uint32, the votes bool, all
    as numba-cuda types them; ``cuda.popc``/``clz``/``ffs``/``brev`` read a NumPy integer at its own
    width, so ``popc`` of a ballot with lane 31 set counts 32 bits, not a minus sign.

Teaching checks the GPU does not give (each raises a ``SimulatorCheckError`` naming the kernel, the
block and thread, the array and the index, with one line on the fix)
    ``SharedMemoryRace``   two threads of a block touch one shared element, at least one of them
                           writing, with no ``cuda.syncthreads()`` between (nor a ``cuda.syncwarp()``
                           both took part in, when they are lanes of one warp). Both orders are caught
                           (read after write, write after read) whatever the thread schedule, because
                           every access since the last barrier is recorded per element. Atomics on
                           shared memory do not race with each other; shuffles are not memory.
    ``NegativeIndex``      a negative index into a kernel argument, shared or local array. Numba wraps
                           it to the far end (``a[-1]`` is ``a[n - 1]``), CUDA C reads outside the
                           array: either way the kernel almost never means it.
    ``OutOfBounds``        (also an ``IndexError``) a positive index past the end, now named.
    ``BarrierDivergence``  a ``cuda.syncthreads()`` that not every thread of the block reaches: some
                           exited, or wait at another barrier. The stock simulator lets the waiting
                           threads go once the others finish, which hides the bug.
    ``WarpSyncError``      a warp intrinsic whose mask omits the calling lane, or that can never
                           complete (a lane it names waits at a barrier or in another intrinsic).

Scheduling and speed: the stock simulator starts an OS thread per CUDA thread (about 0.1 ms each)
and polls them in a busy loop. Here a pool of worker threads runs the simulated threads one at a
time, in thread-id order, handing over only at a barrier, a warp intrinsic or an exit, so a kernel
with no barrier runs without a single thread switch. Running one thread at a time also makes every
run the same; ``thread_order("reverse")`` runs the threads the other way round, which shakes out
bugs that depend on the order (the race checks do not: they see both orders). Global and local
arrays get an index check with a fast path for a plain non-negative int; only shared arrays are
watched for races.

Limits: the checks see only what goes through the ``cuda`` module as the simulator swaps it in
(``from numba import cuda`` then ``cuda.shfl_down_sync(...)``; ``from numba.cuda import
shfl_down_sync`` bypasses it). Shared accesses through slices, fancy indexes or array iteration are
not watched. Races on global memory are not checked, nor memory fences. A thread that spins on a flag
that another thread sets, without blocking, holds up the others until a watchdog (50 ms) lets one
more thread run: slow, but it finishes. ``cuda.activemask()`` names the lanes that reach it together
(see its docstring). Blocks still run one after the other, so a grid-wide sync is still wrong and
races between blocks are invisible.
"""

from __future__ import annotations

import collections
import contextlib
import linecache
import operator
import os
import re
import struct
import sys
import threading
import types

import numpy as np
from numba.cuda import types as numba_types
from numba.cuda.np import numpy_support
from numba.cuda.simulator import kernel as _sim_kernel
from numba.cuda.simulator import kernelapi as _sim_api
from numba.cuda.simulator.cudadrv.devicearray import (
    FakeCUDAArray,
    FakeShape,
    FakeWithinKernelCUDAArray,
)
from numba.cuda.simulator.kernelapi import Dim3

__all__ = [
    "BarrierDivergence",
    "NegativeIndex",
    "OutOfBounds",
    "SharedMemoryRace",
    "SimulatorCheckError",
    "WarpSyncError",
    "install",
    "thread_order",
]

WARP_SIZE = 32
FULL_MASK = 0xFFFFFFFF


# --------------------------------------------------------------------------------------------------
# The errors


class SimulatorCheckError(RuntimeError):
    """A bug the course's simulator checks caught; the GPU would give a wrong answer or a hang."""


class SharedMemoryRace(SimulatorCheckError):
    """Two threads touched one shared-memory element, one writing, with no barrier between."""


class NegativeIndex(SimulatorCheckError, IndexError):
    """A kernel indexed an array with a negative number."""


class OutOfBounds(SimulatorCheckError, IndexError):
    """A kernel indexed an array past its end."""


class BarrierDivergence(SimulatorCheckError):
    """A cuda.syncthreads() that not every thread of the block reaches."""


class WarpSyncError(SimulatorCheckError):
    """A warp intrinsic with a mask that cannot work: it omits the caller, or can never complete."""


class _Abort(BaseException):
    """Unwinds a simulated thread once another thread of its block has failed."""


# --------------------------------------------------------------------------------------------------
# Naming threads, places and arrays in messages


def _dim3(d) -> str:
    return f"({d.x}, {d.y}, {d.z})"


def _who(t) -> str:
    return f"kernel '{t.block.kernel_name}', block {_dim3(t.blockIdx)}, thread {_dim3(t.threadIdx)}"


def _where(site) -> str:
    code, line = site
    return f"{os.path.basename(code.co_filename)}:{line}"


def _fmt_index(idx) -> str:
    if idx.__class__ is tuple:
        return ", ".join(str(i) for i in idx)
    return str(idx)


_ASSIGNED = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::[^=]*)?=[^=]")
_names: dict = {}


def _allocation_name(frame, kind: str) -> str:
    """'shared array 'tile' (day08.py:42)': the variable the allocation is assigned to, and where."""
    code, line = frame.f_code, frame.f_lineno
    key = (code, line, kind)
    name = _names.get(key)
    if name is None:
        m = _ASSIGNED.match(linecache.getline(code.co_filename, line))
        place = f"{os.path.basename(code.co_filename)}:{line}"
        name = f"{kind} '{m.group(1)}' ({place})" if m else f"{kind} allocated at {place}"
        _names[key] = name
    return name


def _has_negative(idx) -> bool:
    if idx.__class__ is int or isinstance(idx, np.integer):
        return idx < 0
    if idx.__class__ is tuple:
        for k in idx:
            if (k.__class__ is int or isinstance(k, np.integer)) and k < 0:
                return True
    return False


def _all_ints(idx) -> bool:
    if idx.__class__ is tuple:
        return all(k.__class__ is int or isinstance(k, np.integer) for k in idx)
    return idx.__class__ is int or isinstance(idx, np.integer)


def _negative_index(arr, idx, writing: bool) -> NegativeIndex:
    t = threading.current_thread()
    verb = "writes" if writing else "reads"
    return NegativeIndex(
        f"{_who(t)} {verb} {arr._name} at index [{_fmt_index(idx)}]: a negative index (Numba would "
        f"silently use the far end of the array, CUDA C memory before it); guard the index, "
        f"e.g. `if i >= 1:` before using `i - 1`. (A course rule, stricter than the GPU: numba-cuda runs "
        f"a[-1] there as Python does, but a kernel's negative index is almost always an off-by-one.)"
    )


def _out_of_bounds(arr, idx, writing: bool) -> IndexError:
    t = threading.current_thread()
    verb = "writes" if writing else "reads"
    if arr._a.size == 0 and arr._name.startswith("dynamic"):
        fix = ("give the launch the dynamic shared memory size in bytes, "
               "kernel[blocks, threads, 0, nbytes](...)")
    else:
        fix = "guard the access, e.g. `if i < n:` (the grid has more threads than elements)"
    return OutOfBounds(
        f"{_who(t)} {verb} {arr._name} at index [{_fmt_index(idx)}], past the end of its shape "
        f"{tuple(arr._a.shape)}; {fix}"
    )


# --------------------------------------------------------------------------------------------------
# Arrays as a kernel sees them: negative and out-of-range indexes raise, naming thread, array, index.
# The subscript methods are shared by the wrappers below; the 1-D variants try a plain non-negative
# int first, which is almost every access and costs one type test and one compare over NumPy.


def _checked_get(self, idx):
    if _has_negative(idx):
        raise _negative_index(self, idx, False)
    try:
        r = self._a[idx]
    except IndexError:
        if _all_ints(idx):
            raise _out_of_bounds(self, idx, False) from None
        raise
    if isinstance(r, (np.ndarray, np.void)):
        return self._view(r, idx)
    return r


def _checked_set(self, idx, value):
    if _has_negative(idx):
        raise _negative_index(self, idx, True)
    try:
        self._a[idx] = value
    except IndexError:
        if _all_ints(idx):
            raise _out_of_bounds(self, idx, True) from None
        raise
    except (TypeError, ValueError):  # NumPy's words for "a wrapper is not a record"
        if value is _unwrap(value):
            raise
        self._a[idx] = _unwrap(value)  # a record read from an array (f[1] = f[0]): copy the record


def _fast_get(self, i):
    if i.__class__ is int and i >= 0:
        try:
            return self._a[i]
        except IndexError:
            raise _out_of_bounds(self, i, False) from None
    return _checked_get(self, i)


def _fast_set(self, i, value):
    if i.__class__ is int and i >= 0:
        try:
            self._a[i] = value
            return
        except IndexError:
            raise _out_of_bounds(self, i, True) from None
    _checked_set(self, i, value)


def _unwrap(obj):
    if isinstance(obj, (_LocalArray, _KernelArray)):
        return obj._a
    if isinstance(obj, FakeWithinKernelCUDAArray):
        return obj._item._ary
    return obj


class _LocalArray:
    """A ``cuda.local.array`` (and the base of shared arrays): a NumPy array behind checked indexes."""

    __slots__ = ("_a", "_name")

    def __init__(self, a: np.ndarray, name: str):
        self._a = a
        self._name = name

    __getitem__ = _checked_get
    __setitem__ = _checked_set

    def _view(self, r, idx):
        return _local_array(r, f"{self._name}[{_fmt_index(idx)}]")

    @property
    def shape(self):
        return FakeShape(self._a.shape)

    @property
    def size(self):
        return self._a.size

    @property
    def ndim(self):
        return self._a.ndim

    @property
    def dtype(self):
        return self._a.dtype

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        return iter(self._a)

    def __getattr__(self, name):
        return getattr(self._a, name)

    def __array__(self, dtype=None, copy=None):
        return self._a if dtype is None else self._a.astype(dtype)

    def __array_ufunc__(self, ufunc, method, *args, **kwargs):
        if "out" in kwargs:
            kwargs["out"] = tuple(_unwrap(o) for o in kwargs["out"])
        return getattr(ufunc, method)(*(_unwrap(a) for a in args), **kwargs)

    def __repr__(self):
        return f"<{self._name}: {self._a!r}>"


class _LocalArray1D(_LocalArray):
    __slots__ = ()
    __getitem__ = _fast_get
    __setitem__ = _fast_set


def _local_array(a: np.ndarray, name: str) -> _LocalArray:
    cls = _LocalArray1D if a.ndim == 1 and a.dtype.fields is None else _LocalArray
    return cls(a, name)


class _KernelArray(FakeWithinKernelCUDAArray):
    """A kernel argument (global memory) as the simulator hands it to the kernel, with checked indexes.

    It keeps the stock wrapper's behaviour (record fields as attributes, ufuncs, ``shape`` that refuses
    negative indexes) and reaches the NumPy array directly instead of through two wrapper layers.
    """

    def __init__(self, item: FakeCUDAArray, name: str):
        d = self.__dict__  # the stock wrapper turns attribute writes into record-field writes
        d["_item"] = item
        d["_a"] = item._ary
        d["_name"] = name

    __getitem__ = _checked_get
    __setitem__ = _checked_set

    def _view(self, r, idx):
        item = FakeCUDAArray(r, stream=self._item.stream)
        if isinstance(r, np.void):
            return FakeWithinKernelCUDAArray(item)
        return _kernel_array(item, f"{self._name}[{_fmt_index(idx)}]")

    @property
    def shape(self):
        return FakeShape(self._a.shape)

    @property
    def size(self):
        return self._a.size

    @property
    def ndim(self):
        return self._a.ndim

    @property
    def dtype(self):
        return self._a.dtype

    def __len__(self):
        return len(self._a)


class _KernelArray1D(_KernelArray):
    __getitem__ = _fast_get
    __setitem__ = _fast_set


def _kernel_array(item: FakeCUDAArray, name: str) -> _KernelArray:
    a = item._ary
    cls = _KernelArray1D if a.ndim == 1 and a.dtype.fields is None else _KernelArray
    return cls(item, name)


# --------------------------------------------------------------------------------------------------
# Memory traffic (course.traffic counts and reports; here every global and shared element access is
# handed to the active recorder). Recording swaps the arrays' subscript methods for recording ones
# and swaps them back after, so a kernel run with no recorder pays nothing.

LOAD, STORE, ATOMIC = 0, 1, 2  # an atomic counts as a load and a store request
WARP_STEP = "warp step"  # logged as (thread id, WARP_STEP) when a lane passes a barrier or a full-warp collective
_recorder = None  # the active course.traffic recorder, or None


def _recording(cls, log):
    """Recording subscript methods for one array class: who (thread id), where (code, line), what
    (array, index, LOAD or STORE), the cheapest record course.traffic can group later. One simulated
    thread runs at a time, so a plain list append needs no lock."""
    get, set_ = cls._plain
    current, frame_of, views = threading.current_thread, sys._getframe, (np.ndarray, np.void, _LocalArray,
                                                                          _KernelArray)

    def rec_get(self, idx):
        r = get(self, idx)
        if not isinstance(r, views):
            f = frame_of(1)
            log((current().tid, f.f_code, f.f_lineno, self, idx, LOAD))
        return r

    def rec_set(self, idx, value):
        set_(self, idx, value)
        f = frame_of(1)
        log((current().tid, f.f_code, f.f_lineno, self, idx, STORE))

    if cls is not _KernelArray1D:
        return rec_get, rec_set

    def rec_get_1d(self, i):
        # the common case, a global array and a plain non-negative int: _fast_get's body inlined (a
        # Python call is a good part of an access's cost in the simulator)
        if i.__class__ is int and i >= 0:
            try:
                r = self._a[i]
            except IndexError:
                raise _out_of_bounds(self, i, False) from None
            f = frame_of(1)
            log((current().tid, f.f_code, f.f_lineno, self, i, LOAD))
            return r
        return rec_get(self, i)

    return rec_get_1d, rec_set


_RECORDED = ("_KernelArray", "_KernelArray1D", "_SharedArray", "_SharedArray1D")


def start_recording(recorder) -> None:
    """Hand every global and shared element access, and every launch, to ``recorder`` (one at a time)."""
    global _recorder
    if _recorder is not None:
        raise RuntimeError("traffic is already being recorded: course.traffic.record() does not nest")
    _recorder = recorder
    for name in _RECORDED:
        cls = globals()[name]
        cls._plain = (cls.__dict__["__getitem__"], cls.__dict__["__setitem__"])
        cls.__getitem__, cls.__setitem__ = _recording(cls, recorder.log.append)


def stop_recording() -> None:
    global _recorder
    for name in _RECORDED:
        cls = globals()[name]
        plain = cls.__dict__.get("_plain")
        if plain is not None:
            cls.__getitem__, cls.__setitem__ = plain
            del cls._plain
    _recorder = None


# --------------------------------------------------------------------------------------------------
# Shared memory and its race detector.
#
# Shared memory is per block and lives until the block ends, so each simulated block gets fresh
# allocations and a fresh record. For every element touched since the block's last barrier the
# record keeps the last writer, the readers and the atomic users, each with the count of syncwarps
# its warp had completed at that access. An access by thread T conflicts with an earlier one by
# thread U != T (one of them a plain write, or a plain access against an atomic) unless a syncwarp
# that both took part in completed in between: only a barrier (which clears the record) or a
# syncwarp orders two threads' memory accesses on Volta and later, where the lanes of a warp are
# not in lock-step. Because both the earlier and the later access are looked at, the order in which
# Python happens to run the threads does not matter.


class _RaceTracker:
    __slots__ = ("lock", "tables")

    def __init__(self):
        self.lock = threading.Lock()
        self.tables: list[dict] = []

    def new_table(self) -> dict:
        table: dict = {}
        self.tables.append(table)
        return table

    def clear(self):
        for table in self.tables:
            table.clear()


def _ordered(u_tid: int, u_clock: int, t) -> bool:
    """Did a syncwarp that both lanes took part in complete after U's access (U, T in one warp)?"""
    if u_tid >> 5 != t.tid >> 5:
        return False
    both = (1 << (u_tid & 31)) | (1 << t.lane)
    syncs = t.warp.syncs
    for k in range(len(syncs) - 1, u_clock - 1, -1):
        if syncs[k] & both == both:
            return True
    return False


def _other_conflict(accessors: dict | None, t) -> int:
    """The lowest thread id among ``accessors`` (tid -> clock) not ordered before thread ``t``, or -1."""
    if not accessors:
        return -1
    found = -1
    me = t.tid
    for u, clock in accessors.items():
        if u != me and (found < 0 or u < found) and not _ordered(u, clock, t):
            found = u
    return found


# record layout: [writer tid or -1, writer's clock, readers {tid: clock}, atomics {tid: clock} or None]
_READ, _WRITE, _ATOMIC = 0, 1, 2


def _track(arr, key: int, idx, kind: int, same=False):
    """Record one access; ``same``: a write that stores the value the element already holds."""
    t = threading.current_thread()
    me = t.tid
    clock = len(t.warp.syncs)
    table = arr._table
    with arr._tracker.lock:
        rec = table.get(key)
        if rec is None:
            if kind == _READ:
                table[key] = [-1, 0, {me: clock}, None]
            elif kind == _WRITE:
                table[key] = [me, clock, {}, None]
            else:
                table[key] = [-1, 0, {}, {me: clock}]
            return
        w = rec[0]
        writer = w if w >= 0 and w != me and not _ordered(w, rec[1], t) else -1
        if kind == _READ:
            other = _other_conflict(rec[3], t)
            if writer < 0 and other < 0:
                rec[2][me] = clock
                return
            conflict = ("write", writer) if writer >= 0 else ("atomic", other)
        elif kind == _WRITE:
            reader = _other_conflict(rec[2], t)
            other = _other_conflict(rec[3], t)
            if same and reader < 0 and other < 0:
                # several threads storing one value (a flag): whichever lands last, the word holds
                # it, so the write-write race is harmless and not reported
                writer = -1
            if writer < 0 and reader < 0 and other < 0:
                rec[0], rec[1] = me, clock
                return
            if writer >= 0:
                conflict = ("write", writer)
            elif reader >= 0:
                conflict = ("read", reader)
            else:
                conflict = ("atomic", other)
        else:
            reader = _other_conflict(rec[2], t)
            if writer < 0 and reader < 0:
                if rec[3] is None:
                    rec[3] = {}
                rec[3][me] = clock
                return
            conflict = ("write", writer) if writer >= 0 else ("read", reader)
    raise _race_error(arr, idx, kind, conflict, t)


def _thread_index(block, tid: int) -> str:
    bx, by, _ = block.block_dim
    return f"({tid % bx}, {tid // bx % by}, {tid // (bx * by)})"


def _access_site() -> str:
    """file:line of the kernel's own access: the first frame outside the simulator and numba."""
    f = sys._getframe(1)
    while f is not None:
        path = f.f_code.co_filename
        if path != __file__ and f"{os.sep}numba{os.sep}" not in path and f"{os.sep}numba_cuda{os.sep}" not in path:
            return f"{os.path.basename(path)}:{f.f_lineno}"
        f = f.f_back
    return "?"


def _race_error(arr, idx, kind: int, conflict, t) -> SharedMemoryRace:
    other_kind, u = conflict
    other = f"thread {_thread_index(t.block, u)}"
    name = arr._name.replace(" (", " (declared at ", 1) if arr._name.endswith(")") else arr._name
    where = f"{name} at index [{_fmt_index(idx)}] ({_access_site()})"
    doing = {_READ: "reads", _WRITE: "writes", _ATOMIC: "atomically updates"}[kind]
    if kind == _READ and other_kind == "write":
        what = f"which {other} wrote since the last barrier: the read may come before or after the write"
        fix = "add cuda.syncthreads() between the write and the read"
    elif kind == _WRITE and other_kind == "read":
        what = f"which {other} read since the last barrier: that read may see the value before or after this write"
        fix = ("add cuda.syncthreads() between them: after the writes if the reader needs the new value "
               "(write, sync, read), before them if it needs the old one (read, sync, write)")
    elif kind == _WRITE and other_kind == "write":
        what = f"which {other} also wrote since the last barrier: which value survives is undefined"
        fix = "give each thread its own element, or combine the values with cuda.atomic.*"
    else:
        did = {"atomic": "updated atomically", "read": "read", "write": "wrote"}[other_kind]
        what = f"which {other} {did} since the last barrier: atomics do not order plain reads and writes"
        fix = "add cuda.syncthreads() between the atomic updates and the plain accesses"
    if u >> 5 == t.tid >> 5:
        fix += "; the two are lanes of one warp, which do not run in lock-step: cuda.syncwarp() orders them too"
    return SharedMemoryRace(f"{_who(t)} {doing} {where}, {what} (a shared-memory race): {fix}")


def _shared_get(self, idx):
    if _has_negative(idx):
        raise _negative_index(self, idx, False)
    try:
        r = self._a[idx]
    except IndexError:
        if _all_ints(idx):
            raise _out_of_bounds(self, idx, False) from None
        raise
    if isinstance(r, np.ndarray):
        return self._view(r, idx)
    if _all_ints(idx):
        _track(self, self._key(idx), idx, _READ)
    return r


def _shared_set(self, idx, value):
    if _has_negative(idx):
        raise _negative_index(self, idx, True)
    try:
        old = self._a[idx] if _all_ints(idx) and self._a.dtype.fields is None else None
        self._a[idx] = value
    except IndexError:
        if _all_ints(idx):
            raise _out_of_bounds(self, idx, True) from None
        raise
    except (TypeError, ValueError):  # NumPy's words for "a wrapper is not a record"
        if value is _unwrap(value):
            raise
        self._a[idx] = _unwrap(value)  # a record read from an array (s[1] = s[0]): copy the record
    if _all_ints(idx) and (len(idx) if idx.__class__ is tuple else 1) == self._a.ndim:
        _track(self, self._key(idx), idx, _WRITE, same=bool(old == self._a[idx]) if old is not None else False)


class _SharedArray(_LocalArray):
    """A ``cuda.shared.array`` of one block: checked indexes, and every element access recorded."""

    __slots__ = ("_tracker", "_table", "_b0", "_strides", "_align")

    def __init__(self, a: np.ndarray, name: str, tracker: _RaceTracker, table: dict, byte0: int, align: int = 0):
        self._a = a
        self._name = name
        self._tracker = tracker
        self._table = table
        self._b0 = byte0  # where this array (or view) starts in its allocation, in bytes
        self._strides = a.strides
        self._align = align or a.itemsize  # the allocation's alignment: Numba's default is the element's size

    def _key(self, idx):
        if idx.__class__ is tuple:
            key = self._b0
            for i, s in zip(idx, self._strides):
                key += int(i) * s
            return key
        return self._b0 + int(idx) * self._strides[0]

    __getitem__ = _shared_get
    __setitem__ = _shared_set

    def _view(self, r, idx):
        base = self._a.__array_interface__["data"][0] - self._b0
        offset = r.__array_interface__["data"][0] - base
        return _shared_array(r, f"{self._name}[{_fmt_index(idx)}]", self._tracker, self._table, offset, self._align)


class _SharedArray1D(_SharedArray):
    """The common case, a 1-D shared array indexed by a plain int, without the general path's tests."""

    __slots__ = ("_s0",)

    def __init__(self, a, name, tracker, table, byte0, align=0):
        super().__init__(a, name, tracker, table, byte0, align)
        self._s0 = a.strides[0]

    def __getitem__(self, i):
        if i.__class__ is int and i >= 0:
            try:
                r = self._a[i]
            except IndexError:
                raise _out_of_bounds(self, i, False) from None
            _track(self, self._b0 + i * self._s0, i, _READ)
            return r
        return _shared_get(self, i)

    def __setitem__(self, i, value):
        if i.__class__ is int and i >= 0:
            a = self._a
            try:
                old = a[i]
                a[i] = value
            except IndexError:
                raise _out_of_bounds(self, i, True) from None
            _track(self, self._b0 + i * self._s0, i, _WRITE, old == a[i])
            return
        _shared_set(self, i, value)


def _shared_array(a: np.ndarray, name: str, tracker: _RaceTracker, table: dict, byte0: int, align: int = 0):
    cls = _SharedArray1D if a.ndim == 1 and a.dtype.fields is None else _SharedArray
    return cls(a, name, tracker, table, byte0, align)


def _np_dtype(dtype) -> np.dtype:
    """A NumPy dtype from what a kernel passes: a Numba type (float32) or anything NumPy takes."""
    if isinstance(dtype, numba_types.Type):
        return numpy_support.as_dtype(dtype)
    return np.dtype(dtype)


class _Shared:
    """``cuda.shared``: one allocation per call site and block, fresh for every block."""

    def __init__(self, dynshared_size: int):
        self._dynshared_size = dynshared_size

    def array(self, shape, dtype, alignment=None):
        if alignment is not None and (alignment <= 0 or alignment & (alignment - 1)
                                      or alignment % _np_dtype(dtype).itemsize):
            raise ValueError(f"shared array alignment {alignment}: a power of two, a multiple of the element size")
        frame = sys._getframe(1)
        key = (frame.f_code, frame.f_lasti)
        block = threading.current_thread().block
        arr = block.shared.get(key)
        if arr is not None:
            return arr
        with block.lock:
            arr = block.shared.get(key)
            if arr is None:
                arr = self._allocate(block, shape, dtype, frame, alignment)
                block.shared[key] = arr
        return arr

    def _allocate(self, block, shape, dtype, frame, alignment=None):
        dtype = _np_dtype(dtype)
        if isinstance(shape, (int, np.integer)) and shape == 0:
            # Dynamic shared memory: every such array views the block's one buffer (launch's 4th arg).
            if block.dyn_buffer is None:
                block.dyn_buffer = np.zeros(self._dynshared_size, dtype=np.byte)
                block.dyn_table = block.tracker.new_table()
            count = self._dynshared_size // dtype.itemsize
            a = np.frombuffer(block.dyn_buffer.data, dtype=dtype, count=count)
            name = _allocation_name(frame, "dynamic shared array")
            return _shared_array(a, name, block.tracker, block.dyn_table, 0)  # Numba: .align 4 (the default)
        a = np.empty(shape, dtype)
        name = _allocation_name(frame, "shared array")
        return _shared_array(a, name, block.tracker, block.tracker.new_table(), 0, alignment or 0)


class _Local:
    """``cuda.local.array``: private to the thread, so only its indexes are checked."""

    def array(self, shape, dtype, alignment=None):
        if alignment is not None:
            raise RuntimeError("Array alignment is not supported in cudasim")
        a = np.empty(shape, _np_dtype(dtype))
        return _local_array(a, _allocation_name(sys._getframe(1), "local array"))


# --------------------------------------------------------------------------------------------------
# Running a block: threads, barriers and warp rendezvous.
#
# A thread switch costs tens of microseconds, as much as a simple kernel's whole body, and starting an
# OS thread more. So simulated threads are not OS threads. A pool of worker threads, kept from one
# block (and launch) to the next, runs them, and only one simulated thread runs at a time: it holds
# the baton until it blocks (at a barrier or a warp intrinsic) or exits, then hands it on. A worker
# whose thread exits starts the next thread of the block (tid order) itself, with no switch at all,
# so a kernel with no barrier runs on one worker. A worker whose thread blocks sleeps on a lock of its
# own; the baton goes to a thread that a barrier or rendezvous has let go, else to a fresh worker that
# starts the next thread. With barriers every thread of the block ends up on a worker of its own, as
# every thread of a block is resident at once on a GPU. One runner at a time also makes the schedule
# deterministic. A thread that runs on and on without blocking (spinning on a flag that a later
# thread sets) would hold the baton forever, so after a while without a hand-over the launching
# thread lets one more thread run.
#
# The block counts its running threads (started or not); when the last one blocks or exits nobody
# else can make progress, so that thread decides: release the barrier, or report the bug that stops
# it (a thread exited or waits at another barrier, a warp intrinsic waits for a lane held elsewhere).

_RUNNING, _AT_BARRIER, _IN_WARP_OP, _EXITED = range(4)
_reverse_order = False  # see thread_order()
_WATCHDOG_S = 0.05  # without a hand-over for this long, let one more thread run


class _Warp:
    __slots__ = ("index", "alive", "n_running", "pending", "threads", "syncs")

    def __init__(self, index: int):
        self.index = index
        self.alive = 0  # bit per lane not yet exited
        self.n_running = 0
        self.pending: list[_Episode] = []  # rendezvous in progress
        self.threads: dict[int, _SimThread] = {}
        self.syncs: list[int] = []  # lanes that took part in each completed syncwarp, in order


class _Episode:
    """One warp intrinsic call, met by every lane its mask names that is still alive."""

    __slots__ = ("op", "mask", "site", "arrived", "payload", "results")

    def __init__(self, op: str, mask: int, site=None):
        self.op = op
        self.mask = mask
        self.site = site  # activemask() only: lanes at different call sites are not converged
        self.arrived = 0
        self.payload: dict = {}
        self.results: dict = {}


class _SimThread:
    """The state of one simulated CUDA thread."""

    __slots__ = ("block", "blockIdx", "threadIdx", "tid", "lane", "warp", "state", "site",
                 "barrier_kind", "barrier_value", "barrier_result", "episode", "waiting", "aborted",
                 "worker")

    def __init__(self, block, thread_idx, tid: int):
        self.block = block
        self.blockIdx = block.blockIdx
        self.threadIdx = Dim3(*thread_idx)
        self.tid = tid
        self.lane = tid & 31
        self.warp = block.warps[tid >> 5]
        self.state = _RUNNING
        self.site = None
        self.barrier_kind = self.barrier_value = self.barrier_result = None
        self.episode = None
        self.waiting = False  # asleep on its worker's wake lock, owed exactly one release
        self.aborted = False
        self.worker = None


_idle: list = []  # workers with no block to work for


class _Worker(threading.Thread):
    """An OS thread that runs simulated threads one after another.

    While it runs one, it stands for it: the simulator's ``cuda`` module reads
    ``threading.current_thread().threadIdx`` and friends, which the block sets here.
    """

    def __init__(self):
        super().__init__(daemon=True, name="cuda-sim-worker")
        self.go = threading.Lock()
        self.go.acquire()
        self.wake = threading.Lock()
        self.wake.acquire()
        self.block = None
        self.sim = None

    def run(self):
        while True:
            self.go.acquire()
            self.block.work(self)

    def sleep(self):
        """Wait, the block lock not held, for the baton (or the news that the block failed)."""
        self.wake.acquire()
        if self.sim.aborted:
            raise _Abort

    # the stock GridGroup.sync() calls this
    def syncthreads(self):
        f = sys._getframe(2)
        if _recorder is not None:
            _recorder.log.append((threading.current_thread().tid, WARP_STEP))  # as at a full-warp collective
        return self.block.barrier(self, (f.f_code, f.f_lineno), "syncthreads", None)


class _Block:
    """Replaces the simulator's BlockManager: runs one block of a launch."""

    def __init__(self, f, grid_dim, block_dim, debug):
        self.fn = f
        self.kernel_name = getattr(f, "__name__", "kernel")
        self.grid_dim = grid_dim
        self.block_dim = tuple(block_dim)
        self.debug = debug
        self.lock = threading.Lock()
        self.finished = threading.Event()  # every worker is done with the block, or a thread failed
        self.all_returned = threading.Event()  # every worker is back in the pool
        self.error = None
        self.at_barrier: list[_SimThread] = []
        self.ready: collections.deque[_SimThread] = collections.deque()  # let go, waiting for the baton
        self.shared: dict = {}
        self.tracker = _RaceTracker()
        self.dyn_buffer = None
        self.dyn_table = None

    def _kernel_args(self, args):
        code = getattr(self.fn, "__code__", None)
        names = code.co_varnames[: code.co_argcount] if code is not None else ()
        out = []
        for k, a in enumerate(args):
            if a.__class__ is FakeWithinKernelCUDAArray:
                item = a._item
                if isinstance(item._ary, np.ndarray) and item._ary.ndim > 0:
                    name = names[k] if k < len(names) else f"#{k}"
                    a = _kernel_array(item, f"array '{name}'")
            out.append(a)
        return out

    def run(self, grid_point, *args):
        if _recorder is not None:  # blocks run one after another: a marker starts each
            if not any(grid_point):
                _recorder.log.append(self.kernel_name)  # the launch's first block
            _recorder.log.append((None, grid_point))
        self.blockIdx = Dim3(*grid_point)
        self.args = self._kernel_args(args)
        bx, by, bz = self.block_dim
        n = bx * by * bz
        self.n_threads = self.n_alive = self.n_running = n
        self.warps = [_Warp(w) for w in range((n + 31) // 32)]
        self.sims = []
        for z in range(bz):
            for y in range(by):
                for x in range(bx):
                    s = _SimThread(self, (x, y, z), len(self.sims))
                    s.warp.alive |= 1 << s.lane
                    s.warp.threads[s.lane] = s
                    self.sims.append(s)
        for w in self.warps:
            w.n_running = w.alive.bit_count()
        self.reverse = _reverse_order
        self.n_started = 0  # threads started so far (in tid order, or reversed)
        self.n_workers = 0  # workers working for this block
        self.n_active = 0  # ... of which running a thread (normally one: the baton's holder)
        self.handovers = 0
        with self.lock:
            self._spawn()
        seen = -1
        try:
            while not self.finished.wait(_WATCHDOG_S):
                with self.lock:
                    if self.error is None and self.handovers == seen:
                        self._dispatch(force=True)
                    seen = self.handovers
        except BaseException as e:  # Ctrl-C in a notebook: stop the block's threads too
            self.fail(e)
            raise
        if self.error is not None:
            exc, tb = self.error
            # let the woken threads unwind before anything else runs; a thread that never blocks
            # again (an endless loop) is left behind and its worker is not reused
            self.all_returned.wait(2.0)
            raise exc.with_traceback(tb)

    # ---- the baton (the lock held)

    def _spawn(self):
        w = _idle.pop() if _idle else None
        if w is None:
            w = _Worker()
            w.start()
        w.block = self
        self.n_workers += 1
        self.n_active += 1
        w.go.release()

    def _next_to_start(self):
        if self.error is None and self.n_started < self.n_threads:
            s = self.sims[~self.n_started if self.reverse else self.n_started]
            self.n_started += 1
            self.handovers += 1
            return s
        return None

    def _dispatch(self, force=False):
        """Nobody runs (or the watchdog says nobody gets on): give the baton to a thread."""
        if self.error is not None or (self.n_active and not force):
            return
        if self.ready:
            s = self.ready.popleft()
            s.waiting = False
            self.n_active += 1
            self.handovers += 1
            s.worker.wake.release()
        elif self.n_started < self.n_threads:
            self._spawn()

    def _park(self, s: _SimThread):
        s.waiting = True
        self.n_active -= 1
        self.handovers += 1

    def work(self, w: _Worker):
        """Run threads of the block on worker ``w`` until there is none left to start."""
        fn, args = self.fn, self.args
        errstate = np.seterr(divide="raise") if self.debug else None
        with self.lock:
            s = self._next_to_start()
        while s is not None:
            s.worker = w
            w.sim = s
            w.threadIdx = s.threadIdx
            w.blockIdx = s.blockIdx
            w.thread_id = w.tid = s.tid
            w.lane = s.lane
            w.warp = s.warp
            try:
                fn(*args)
            except _Abort:
                pass
            except BaseException as e:
                self.fail(e, s, e.__traceback__)
            with self.lock:
                self._exited(s)
                s = self._next_to_start()
        with self.lock:
            self.n_workers -= 1
            self.n_active -= 1
            last = self.n_workers == 0
            self._dispatch()
        if errstate is not None:
            np.seterr(**errstate)
        w.block = w.sim = None
        _idle.append(w)
        if last:
            self.all_returned.set()
            self.finished.set()

    # ---- failure

    def fail(self, exc, s=None, tb=None):
        with self.lock:
            self._fail_locked(exc, s, tb)

    def _fail_locked(self, exc, s=None, tb=None):
        if self.error is not None:
            return
        if s is not None and not isinstance(exc, SimulatorCheckError):
            # as the stock simulator does: say which thread raised
            prefix = f"tid={list(s.threadIdx)} ctaid={list(s.blockIdx)}"
            try:
                exc = type(exc)(f"{prefix}: {exc}" if str(exc) else prefix)
            except Exception:
                pass
        self.error = (exc, tb)
        self.ready.clear()
        for u in self.sims:
            if u.waiting:
                u.waiting = False
                u.aborted = True
                u.worker.wake.release()
        self.finished.set()

    # ---- block barrier

    def barrier(self, w: _Worker, site, kind: str, value):
        s = w.sim
        with self.lock:
            if self.error is not None:
                raise _Abort
            s.state = _AT_BARRIER
            s.site = site
            s.barrier_kind = kind
            s.barrier_value = value
            self.at_barrier.append(s)
            self.n_running -= 1
            s.warp.n_running -= 1
            self._park(s)
            self._progress(s.warp)
            self._dispatch()
        w.sleep()
        return s.barrier_result

    def _release_barrier(self):
        waiting = sorted(self.at_barrier, key=lambda s: s.tid, reverse=self.reverse)
        kind = waiting[0].barrier_kind
        result = None
        if kind == "syncthreads_count":
            result = sum(1 for s in waiting if s.barrier_value)
        elif kind == "syncthreads_and":
            result = int(all(s.barrier_value for s in waiting))
        elif kind == "syncthreads_or":
            result = int(any(s.barrier_value for s in waiting))
        self.at_barrier = []
        self.tracker.clear()  # every shared access so far is now ordered before every later one
        self.n_running = self.n_alive
        for warp in self.warps:
            warp.n_running = warp.alive.bit_count()
        for s in waiting:
            s.state = _RUNNING
            s.barrier_result = result
        self.ready.extend(waiting)

    # ---- warp rendezvous

    def warp_op(self, w: _Worker, op: str, mask: int, payload, site):
        s = w.sim
        lane = s.lane
        bit = 1 << lane
        if not mask & bit:
            raise WarpSyncError(
                f"{_who(s)} (lane {lane}) calls {op} at {_where(site)} with mask {mask:#010x}, which "
                f"does not name its own lane: include every calling lane in the mask (e.g. 0xFFFFFFFF, "
                f"or cuda.activemask())"
            )
        warp = s.warp
        with self.lock:
            if self.error is not None:
                raise _Abort
            at = site if op == "activemask" else None
            for ep in warp.pending:
                if ep.op == op and ep.mask == mask and ep.site == at and not ep.arrived & bit:
                    break
            else:
                ep = _Episode(op, mask, at)
                warp.pending.append(ep)
            ep.arrived |= bit
            ep.payload[lane] = payload
            s.state = _IN_WARP_OP
            s.site = site
            s.episode = ep
            self.n_running -= 1
            warp.n_running -= 1
            if op != "activemask" and not mask & warp.alive & ~ep.arrived:
                self._complete(warp, ep)  # the last lane to arrive keeps the baton
                return ep.results[lane]
            self._park(s)
            self._progress(warp)
            self._dispatch()
        w.sleep()
        return ep.results[lane]

    def _complete(self, warp: _Warp, ep: _Episode):
        ep.results = _RESULTS[ep.op](ep)
        warp.pending.remove(ep)
        if ep.op == "syncwarp":
            warp.syncs.append(ep.arrived)
        n = ep.arrived.bit_count()
        warp.n_running += n
        self.n_running += n
        for lane in sorted(ep.payload, reverse=self.reverse):
            u = warp.threads[lane]
            u.state = _RUNNING
            if u.waiting:
                self.ready.append(u)

    # ---- progress and exits (the lock held)

    def _progress(self, warp: _Warp):
        if self.error is not None:
            return
        if warp.n_running == 0:
            # every lane of the warp is blocked or gone: those in activemask() see who is here
            for ep in [e for e in warp.pending if e.op == "activemask"]:
                self._complete(warp, ep)
        if self.n_running == 0 and self.n_alive > 0:
            self._resolve()

    def _exited(self, s: _SimThread):
        s.state = _EXITED
        self.n_alive -= 1
        self.n_running -= 1
        self.handovers += 1
        warp = s.warp
        warp.alive &= ~(1 << s.lane)
        warp.n_running -= 1
        if self.error is None:
            # a lane that has exited no longer holds up a rendezvous that names it
            for ep in [e for e in warp.pending if e.op != "activemask"]:
                if not ep.mask & warp.alive & ~ep.arrived:
                    self._complete(warp, ep)
            self._progress(warp)

    def _resolve(self):
        """No thread is running: release the barrier, or report why the block cannot go on."""
        waiting = self.at_barrier
        if len(waiting) < self.n_alive:
            self._fail_locked(self._warp_deadlock())
            return
        first = min(waiting, key=lambda s: s.tid)
        if self.n_alive < self.n_threads:
            gone = next(s for s in self.sims if s.state == _EXITED)
            self._fail_locked(BarrierDivergence(
                f"{_who(first)} waits at cuda.syncthreads() ({_where(first.site)}), but thread "
                f"{_dim3(gone.threadIdx)} exited the kernel without reaching it: every thread of a "
                f"block must reach every barrier; instead of returning early (or syncing inside an "
                f"`if` that only some threads take), guard the work and keep the barrier outside it. "
                f"(A course rule: the CUDA programming guide leaves such a barrier undefined; an H200 "
                f"runs it when whole warps return, but code that relies on it breaks elsewhere.)"
            ))
            return
        other = next((s for s in waiting if s.site != first.site), None)
        if other is not None:
            self._fail_locked(BarrierDivergence(
                f"{_who(first)} waits at cuda.syncthreads() ({_where(first.site)}), but thread "
                f"{_dim3(other.threadIdx)} waits at a different barrier ({_where(other.site)}): every "
                f"thread of a block must reach the same barriers; move cuda.syncthreads() out of the "
                f"branch that only some threads take"
            ))
            return
        self._release_barrier()

    def _warp_deadlock(self) -> WarpSyncError:
        s = next(s for s in self.sims if s.state == _IN_WARP_OP)
        ep = s.episode
        missing = ep.mask & s.warp.alive & ~ep.arrived
        if missing:
            lane = (missing & -missing).bit_length() - 1
            u = s.warp.threads[lane]
            if u.state == _AT_BARRIER:
                doing = f"waits at cuda.syncthreads() ({_where(u.site)})"
            else:
                doing = f"waits in {u.episode.op} ({_where(u.site)}) with mask {u.episode.mask:#010x}"
            about = f"lane {lane} (thread {_dim3(u.threadIdx)}), which {doing}"
        else:
            about = "lanes that never arrive"
        return WarpSyncError(
            f"{_who(s)} (lane {s.lane}) waits in {ep.op} ({_where(s.site)}) with mask {ep.mask:#010x} "
            f"for {about}: every lane named in the mask must call the same warp intrinsic; name only "
            f"the lanes that take this branch in the mask, or move the call out of the branch"
        )


# --------------------------------------------------------------------------------------------------
# What each warp intrinsic returns, computed once all its lanes have met. Lanes are those that took
# part (the mask's lanes still alive).


def _shfl_source(op: str, lane: int, b: int):
    """The source lane of numba-cuda's shfl.sync (width 32: c = 0x1f, or 0 for up), or None."""
    b &= 31  # the instruction reads the low 5 bits of the lane operand
    if op == "shfl_sync":
        return b
    if op == "shfl_up_sync":
        j = lane - b
        return j if j >= 0 else None
    if op == "shfl_down_sync":
        j = lane + b
        return j if j < WARP_SIZE else None
    return lane ^ b


def _shuffle(ep: _Episode) -> dict:
    vals = ep.payload  # lane -> (value, lane operand)
    out = {}
    for lane, (v, b) in vals.items():
        j = _shfl_source(ep.op, lane, b)
        if j is None or j not in vals:
            out[lane] = v  # out of the warp: own value; a lane not taking part: undefined on a GPU
        else:
            src = vals[j][0]
            out[lane] = src if src.__class__ is v.__class__ else v.__class__(src)
    return out


def _as_int32(bits: int) -> np.int32:
    return np.int32(bits - (1 << 32) if bits & 0x80000000 else bits)


def _ballot(ep: _Episode) -> dict:
    bits = 0
    for lane, p in ep.payload.items():
        if p:
            bits |= 1 << lane
    r = _as_int32(bits)
    return dict.fromkeys(ep.payload, r)


def _vote(fn):
    def vote(ep: _Episode) -> dict:
        r = bool(fn([bool(p) for p in ep.payload.values()]))
        return dict.fromkeys(ep.payload, r)

    return vote


def _bit_pattern(v):
    if isinstance(v, (float, np.floating)):
        fmt = "<f" if isinstance(v, np.float32) else "<d"
        return struct.pack(fmt, v)
    return int(v)


def _match_any(ep: _Episode) -> dict:
    groups: dict = {}
    for lane, v in ep.payload.items():
        groups[_bit_pattern(v)] = groups.get(_bit_pattern(v), 0) | (1 << lane)
    return {lane: _as_int32(groups[_bit_pattern(v)]) for lane, v in ep.payload.items()}


def _match_all(ep: _Episode) -> dict:
    same = len({_bit_pattern(v) for v in ep.payload.values()}) == 1
    # match.all gives back the lanes that took part: the mask's lanes that are alive (in a partial warp
    # a full mask names lanes that do not exist)
    r = (_as_int32(ep.arrived if same else 0), same)
    return dict.fromkeys(ep.payload, r)


def _activemask(ep: _Episode) -> dict:
    return dict.fromkeys(ep.payload, np.uint32(ep.arrived))


_RESULTS = {
    "shfl_sync": _shuffle,
    "shfl_up_sync": _shuffle,
    "shfl_down_sync": _shuffle,
    "shfl_xor_sync": _shuffle,
    "ballot_sync": _ballot,
    "all_sync": _vote(all),
    "any_sync": _vote(any),
    "eq_sync": _vote(lambda ps: all(ps) or not any(ps)),
    "match_any_sync": _match_any,
    "match_all_sync": _match_all,
    "activemask": _activemask,
    "syncwarp": lambda ep: dict.fromkeys(ep.payload),
}


# --------------------------------------------------------------------------------------------------
# The cuda.* functions a kernel calls. Argument types follow numba-cuda's typing, so a kernel that
# runs here also compiles for the GPU.

_SHFL_TYPES = (int, float, np.int32, np.int64, np.float32, np.float64)


def _mask(mask, op: str) -> int:
    try:
        return operator.index(mask) & FULL_MASK  # the instruction takes the low 32 bits
    except TypeError:
        raise TypeError(f"{op}: the mask must be an integer, got {type(mask).__name__}") from None


def _collective(op: str, mask, payload):
    t = threading.current_thread()
    f = sys._getframe(2)
    m = _mask(mask, op)
    if _recorder is not None and m == FULL_MASK:
        # Every lane of the warp passes this point together: course.traffic counts a lane's executions
        # of an instruction from here on, so a store some lanes skip in one loop iteration (a kept
        # element's) still joins the other lanes' store of the same iteration into one request.
        _recorder.log.append((t.tid, WARP_STEP))
    return t.block.warp_op(t, op, m, payload, (f.f_code, f.f_lineno))


def _shfl(op: str, value, b):
    if value.__class__ not in _SHFL_TYPES:
        raise TypeError(f"{op} only supports 32- and 64-bit ints and floats, got "
                        f"{type(value).__name__} {value!r}")
    return value, operator.index(b)


def _predicate(op: str, p):
    if isinstance(p, (float, np.floating, complex)):
        raise TypeError(f"{op}: the predicate must be an integer or boolean, got {type(p).__name__}")
    return p


def shfl_sync(self, mask, value, src_lane):
    """The value of ``value`` in lane ``src_lane`` (taken modulo 32)."""
    return _collective("shfl_sync", mask, _shfl("shfl_sync", value, src_lane))


def shfl_up_sync(self, mask, value, delta):
    """The value of ``value`` in lane ``laneid - delta``; lanes below ``delta`` keep their own."""
    return _collective("shfl_up_sync", mask, _shfl("shfl_up_sync", value, delta))


def shfl_down_sync(self, mask, value, delta):
    """The value of ``value`` in lane ``laneid + delta``; lanes past the warp's end keep their own."""
    return _collective("shfl_down_sync", mask, _shfl("shfl_down_sync", value, delta))


def shfl_xor_sync(self, mask, value, lane_mask):
    """The value of ``value`` in lane ``laneid ^ lane_mask`` (a butterfly exchange)."""
    return _collective("shfl_xor_sync", mask, _shfl("shfl_xor_sync", value, lane_mask))


def ballot_sync(self, mask, predicate):
    """An int32 whose bit i is set when lane i takes part and its predicate is nonzero."""
    return _collective("ballot_sync", mask, _predicate("ballot_sync", predicate))


def all_sync(self, mask, predicate):
    return _collective("all_sync", mask, _predicate("all_sync", predicate))


def any_sync(self, mask, predicate):
    return _collective("any_sync", mask, _predicate("any_sync", predicate))


def eq_sync(self, mask, predicate):
    return _collective("eq_sync", mask, _predicate("eq_sync", predicate))


def match_any_sync(self, mask, value):
    """The lanes (int32 mask) whose ``value`` has the same bits as this lane's."""
    if value.__class__ not in _SHFL_TYPES:
        raise TypeError(f"match_any_sync supports 32- and 64-bit ints and floats, got {type(value).__name__}")
    return _collective("match_any_sync", mask, value)


def match_all_sync(self, mask, value):
    """(mask of the lanes, True) when every lane has the same ``value``, else (0, False)."""
    if value.__class__ not in _SHFL_TYPES:
        raise TypeError(f"match_all_sync supports 32- and 64-bit ints and floats, got {type(value).__name__}")
    return _collective("match_all_sync", mask, value)


def syncwarp(self, mask=FULL_MASK):
    """Wait for the lanes of ``mask`` and order their memory accesses (before -> after)."""
    _collective("syncwarp", mask, None)


def activemask(self):
    """The lanes of this warp that are here now: those that reach activemask() together.

    On a GPU these are the lanes executing in convergence. Here a lane waits until every other lane of
    its warp is either at activemask(), blocked elsewhere or exited, and the result names those at
    activemask(): lanes that exited (an early return) or took another branch are not in it.
    """
    t = threading.current_thread()
    f = sys._getframe(1)
    return t.block.warp_op(t, "activemask", FULL_MASK, None, (f.f_code, f.f_lineno))


def lanemask_lt(self):
    return np.uint32((1 << threading.current_thread().lane) - 1)


def _laneid(self):
    return threading.current_thread().lane


def _syncthreads(self):
    t = threading.current_thread()
    f = sys._getframe(1)
    t.block.barrier(t, (f.f_code, f.f_lineno), "syncthreads", None)


def _barrier_with(kind: str):
    def sync(self, predicate):
        t = threading.current_thread()
        f = sys._getframe(1)
        return t.block.barrier(t, (f.f_code, f.f_lineno), kind, predicate)

    sync.__name__ = kind
    return sync


# Bit manipulation at the operand's width (a NumPy integer's own; a Python int as 32 bits when it fits,
# else 64), so that a negative int32 such as a ballot with lane 31 set is read as its 32 bits.


def _unsigned(val) -> tuple[int, int]:
    if isinstance(val, np.integer):
        width = val.dtype.itemsize * 8
    else:
        val = operator.index(val)
        width = 32 if -(1 << 31) <= val < (1 << 32) else 64
    return int(val) & ((1 << width) - 1), width


def popc(self, val):
    return _unsigned(val)[0].bit_count()


def clz(self, val):
    v, width = _unsigned(val)
    return width - v.bit_length()


def ffs(self, val):
    v, _ = _unsigned(val)
    return (v & -v).bit_length()


def brev(self, val):
    v, width = _unsigned(val)
    return int(format(v, f"0{width}b")[::-1], 2)


def byte_perm(x, y, selector):
    """libdevice's __nv_byte_perm (PTX prmt.b32): byte n of the result is byte ((selector >> 4n) & 7)
    of the eight bytes y:x (x's bytes are 0-3, y's 4-7), as numba-cuda types it: int32 in and out."""
    pool = (_unsigned(np.uint32(np.int64(x) & 0xFFFFFFFF))[0]
            | (_unsigned(np.uint32(np.int64(y) & 0xFFFFFFFF))[0] << 32))
    s = int(selector)
    out = 0
    for n in range(4):
        out |= ((pool >> (8 * ((s >> (4 * n)) & 7))) & 0xFF) << (8 * n)
    return np.uint32(out).view(np.int32)


# What the course's kernels call of libdevice (numba.cuda.libdevice, reached as cuda.libdevice): the
# simulator's cuda module has no libdevice of its own.
libdevice = types.SimpleNamespace(byte_perm=byte_perm)


# Wide accesses (course.wide): one 16-byte load or store a lane, as CUDA C's float4. Each element
# goes through the array's checked subscripts (bounds, races), and the traffic recorder sees one
# access of the vector's width at the kernel's line, so a warp of 16-byte loads is one request.


class MisalignedAccess(SimulatorCheckError):
    """A wide (16-byte) access whose address is not a multiple of its width."""


def _byte_address(array, index) -> int:
    """The element's byte address: in the block's shared allocation, or in host memory."""
    a = array._a
    if index.__class__ is not tuple:
        index = (index,)
    offset = sum(int(i) * s for i, s in zip(index, a.strides))
    if isinstance(array, _SharedArray):
        return array._b0 + offset
    return a.__array_interface__["data"][0] + offset


def vector_access(array, index, count: int, values=None):
    """Load (``values`` None) or store ``count`` consecutive elements along the last axis, from
    ``index`` on, as one access of ``count * itemsize`` bytes: the address must be a multiple of it."""
    if not isinstance(array, (_KernelArray, _SharedArray, _LocalArray)):
        raise TypeError(f"a wide access needs a kernel argument or a shared or local array, not {type(array)}")
    a = array._a
    index = index if index.__class__ is tuple else (index,)
    if len(index) != a.ndim or not _all_ints(index):
        raise TypeError(f"a wide access on {array._name} needs {a.ndim} integer indices, got {index}")
    if a.ndim > 1 and not a.flags.c_contiguous:
        raise TypeError(f"a wide access needs a C-contiguous array; {array._name} is not")
    width = count * a.itemsize
    t = threading.current_thread()
    if _has_negative(index):
        raise _negative_index(array, index, values is not None)
    if int(index[-1]) + count > a.shape[-1]:
        last = index[:-1] + (int(index[-1]) + count - 1,)
        raise _out_of_bounds(array, last, values is not None)
    if isinstance(array, _SharedArray) and array._align < width:
        raise MisalignedAccess(
            f"{_who(t)} {'writes' if values is not None else 'reads'} {width} bytes of {array._name}, declared "
            f"with the default alignment of {array._align} bytes: Numba aligns a shared array only to its element "
            f"size, so on the GPU it may start at any multiple of {array._align}. Declare it "
            f"cuda.shared.array(shape, dtype, alignment={width})")
    if _byte_address(array, index) % width:
        raise MisalignedAccess(
            f"{_who(t)} {'writes' if values is not None else 'reads'} {width} bytes of {array._name} at "
            f"index [{_fmt_index(index)}], an address that is not a multiple of {width}: the GPU stops the "
            f"kernel (misaligned address). Start each wide access at an element index that is a multiple of "
            f"{count}, in a row whose length is one too (pad the rows, or fall back to single elements)")
    head = index[:-1]
    j0 = int(index[-1])
    recorded = isinstance(array, (_KernelArray, _SharedArray))  # local memory is not counted
    log = _recorder.log if _recorder is not None and recorded else None
    if values is not None and len(values) != count:
        raise TypeError(f"a wide store of {count} elements was given {len(values)} values")
    # While recording, the elements go through the class's own accessors (the race checks, no log
    # entry each) and the access is logged once, whole. Not by logging each element and cutting them
    # from the log afterwards: when the watchdog lets a second thread run (a slow machine), that thread's
    # entries land in between and would be cut too.
    get, put = type(array)._plain if log is not None else (type(array).__getitem__, type(array).__setitem__)
    if values is None:
        out = tuple(get(array, head + (j0 + j,)) for j in range(count))
    else:
        for j in range(count):
            put(array, head + (j0 + j,), values[j])
        out = None
    if log is not None:
        f = sys._getframe(2)  # the kernel, past course.wide's function
        log.append((t.tid, f.f_code, f.f_lineno, array, index, LOAD if values is None else STORE, width))
    return out


# Atomics: an atomic on shared memory is recorded as such (atomics do not race with one another),
# and every atomic's index is checked like any other access.


def _atomic_target(array, index):
    if isinstance(array, (_LocalArray, _KernelArray)):
        if _has_negative(index):
            raise _negative_index(array, index, True)
        if _recorder is not None and isinstance(array, (_KernelArray, _SharedArray)):
            f, t = sys._getframe(2), threading.current_thread()  # the kernel, past the atomic's wrapper
            _recorder.log.append((t.tid, f.f_code, f.f_lineno, array, index, ATOMIC))
        if isinstance(array, _SharedArray) and _all_ints(index):
            try:
                array._a[index]
            except IndexError:
                raise _out_of_bounds(array, index, True) from None
            _track(array, array._key(index), index, _ATOMIC)
        return array._a
    return array


def _wrap_atomic(fn):
    def atomic(self, array, index, *args):
        return fn(self, _atomic_target(array, index), index, *args)

    atomic.__name__ = fn.__name__
    atomic.__doc__ = fn.__doc__
    return atomic


def _wrap_compare_and_swap(fn):
    def compare_and_swap(self, array, old, val):
        if isinstance(array, (_LocalArray, _KernelArray)):
            array = _atomic_target(array, (0,) * array.ndim)
        return fn(self, array, old, val)

    return compare_and_swap


# --------------------------------------------------------------------------------------------------
# Installing


def _wrap_module_init(init):
    def __init__(self, grid_dim, block_dim, dynshared_size):
        init(self, grid_dim, block_dim, dynshared_size)
        self._shared = _Shared(dynshared_size)
        self._local = _Local()

    return __init__


@contextlib.contextmanager
def thread_order(order: str):
    """Start the simulated threads of each block in ``"forward"`` (tid 0 first, the default) or
    ``"reverse"`` order, and let threads go from barriers and warp intrinsics in that order.

    The simulator runs one thread at a time, so a kernel that is correct only for one order (a
    race the checks cannot see, such as one on global memory) can give a different answer in the
    other: running it both ways is a cheap way to shake such bugs out.
    """
    if order not in ("forward", "reverse"):
        raise ValueError(f"thread_order: 'forward' or 'reverse', got {order!r}")
    global _reverse_order
    old, _reverse_order = _reverse_order, order == "reverse"
    try:
        yield
    finally:
        _reverse_order = old


_installed = False


def install() -> None:
    """Patch Numba's CUDA simulator in place (idempotent). Call before launching kernels."""
    global _installed
    if _installed:
        return
    module = _sim_api.FakeCUDAModule
    for fn in (shfl_sync, shfl_up_sync, shfl_down_sync, shfl_xor_sync, ballot_sync, all_sync,
               any_sync, eq_sync, match_any_sync, match_all_sync, syncwarp, activemask, lanemask_lt,
               popc, clz, ffs, brev):
        setattr(module, fn.__name__, fn)
    module.laneid = property(_laneid)
    module.libdevice = libdevice
    module.syncthreads = _syncthreads
    for kind in ("syncthreads_count", "syncthreads_and", "syncthreads_or"):
        setattr(module, kind, _barrier_with(kind))
    module.__init__ = _wrap_module_init(module.__init__)

    atomic = _sim_api.FakeCUDAAtomic
    for name in ("add", "sub", "and_", "or_", "xor", "inc", "dec", "exch", "max", "min", "nanmax",
                 "nanmin", "cas"):
        setattr(atomic, name, _wrap_atomic(getattr(atomic, name)))
    atomic.compare_and_swap = _wrap_compare_and_swap(atomic.compare_and_swap)

    _sim_kernel.BlockManager = _Block
    _installed = True
