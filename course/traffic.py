"""Memory traffic measured in the simulator: requests, sectors and shared-memory wavefronts.

    from course import traffic
    with traffic.record() as rec:
        kernel[grid, block](*args)          # or any host function that launches kernels
    for k in rec.kernels:                   # one entry per kernel, in the order of first launch
        k.name, k.launches, k.global_load_requests, k.global_load_sectors, ...
    rec.total                               # the same fields summed over kernels

The counts are the hardware's, as Nsight Compute names them (``l1tex__t_requests`` / ``_sectors``
for global loads and stores, shared-memory wavefronts), so a learner without a GPU sees what a
profiler would show for the same kernel:

- a *request* is one memory instruction executed by the active lanes of one warp (32 consecutive
  thread ids of the block, x fastest). The simulator runs lanes one after another, so a lane's
  accesses are grouped by (instruction, array, how many times that lane has executed it since it
  last passed a barrier or a full-warp collective): the k-th such execution by each lane of a warp is
  one request; lanes that skip it are absent. Counting from the last ballot or barrier keeps a
  store that some lanes skip (a compaction's, in a loop with a ballot each iteration) in step;
- the *sectors* of a global request are the distinct 32-byte segments its lanes' bytes fall in,
  addresses taken from the start of the array's allocation (as if 256-byte aligned; a view such as
  ``x[r]`` keeps its offset into its base array);
- the *wavefronts* of a shared request are the most distinct 4-byte words any one bank (word mod 32)
  is asked for, and at least the request's distinct bytes / 128: lanes reading one word share it (a
  broadcast). 32 consecutive float32: 1; a column of a 32 x 32 float32 tile: 32; of a 32 x 33 tile: 1;
  32 consecutive float64: 2;
- an atomic counts as a load and a store request; on shared memory its lanes on one word are served
  one after another (each a wavefront, no broadcast); local memory is not counted (``course.compiler``
  shows stack frames and spills).

The simulator records (course.simulator hands every access here while a recording is active); this
module groups and counts. Recording needs the simulator: on a GPU, Nsight Compute counts the same.

Checked against Nsight Compute on an H200 (``tools/traffic_vs_ncu.py``, the largest test size):
requests and sectors equal to the unit for days 01, 02 and 05 and for day 17's global traffic, and
shared wavefronts equal for days 08 and 17; day 08's other counts differ by under 2 % (cause not
yet traced: 522 load requests here against 516 for the tiled kernel). Nsight's shared *request* count
(``smsp__inst_executed_op_shared_*``) also counts warps whose lanes are all predicated off, which
move nothing (day 17's tree: 1005 there, 225 here, both 225 wavefronts); here such a warp is absent.
A plain kernel runs about 1.45x slower while recording (a vector add, 4096 threads); one that does
little besides its 34 loads a thread (day 08's naive convolution) about 4.5x. With no recording
active nothing is added.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, fields

import numpy as np

from course import DEVICE

SECTOR = 32  # bytes: the unit the L1 and L2 move global memory in
BANKS = 32  # shared-memory banks, each 4 bytes wide
WAVEFRONT_BYTES = BANKS * 4


@dataclass
class KernelTraffic:
    """What one kernel (all its launches together) asked of global and shared memory."""

    name: str
    launches: int = 0
    global_load_requests: int = 0
    global_load_sectors: int = 0
    global_store_requests: int = 0
    global_store_sectors: int = 0
    shared_requests: int = 0
    shared_wavefronts: int = 0

    @property
    def sectors_per_load(self) -> float:
        return self.global_load_sectors / self.global_load_requests if self.global_load_requests else 0.0

    @property
    def sectors_per_store(self) -> float:
        return self.global_store_sectors / self.global_store_requests if self.global_store_requests else 0.0

    @property
    def wavefronts_per_request(self) -> float:
        return self.shared_wavefronts / self.shared_requests if self.shared_requests else 0.0

    @property
    def global_bytes(self) -> int:
        """Bytes the sectors carry between L1 and the memory system: what DRAM sees at most."""
        return SECTOR * (self.global_load_sectors + self.global_store_sectors)

    def add(self, other: KernelTraffic) -> None:
        for f in fields(self):
            if f.name != "name":
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


def _origin(arr, shared_cls) -> tuple:
    """(allocation id, byte offset of the view's first element in it, strides, itemsize, ndim, shared)."""
    a = arr._a
    if isinstance(arr, shared_cls):  # offsets in the block's shared allocation, one table per allocation
        return id(arr._table), arr._b0, a.strides, a.itemsize, a.ndim, True
    base = a
    while isinstance(base.base, np.ndarray):
        base = base.base
    offset = a.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    return id(base), offset, a.strides, a.itemsize, a.ndim, False


def _int_index(idx, ndim: int):
    """The index as a tuple of ints if it names one element, else None (a slice, a row view)."""
    if idx.__class__ is not tuple:
        idx = (idx,)
    if len(idx) != ndim:
        return None
    try:
        return tuple(int(i) for i in idx)
    except TypeError:
        return None


class Recording:
    """The accesses of every launch while :func:`record` is active, counted per kernel on demand.

    The simulator appends to ``log``, in order, a kernel's name at each launch, a block's index when
    the block starts (blocks run one after another) and, for each element access, (thread id, code,
    line, array, index, LOAD or STORE); the grouping into requests
    happens here, after the kernels ran, so that recording costs the kernel little. A wide access
    (course.wide) is one entry with its width in bytes appended.
    """

    def __init__(self):
        self.log: list = []
        self._counted: tuple[int, list[KernelTraffic]] | None = None

    def _count(self) -> list[KernelTraffic]:
        from course import simulator
        from course.simulator import ATOMIC, LOAD, STORE

        shared_cls = simulator._SharedArray
        names: list[str] = []
        executions: dict = {}  # (launch, block, tid, line, allocation, kind, step) -> executions so far
        steps: dict = {}  # tid -> barriers and full-warp collectives the lane has passed in its block
        requests: dict = {}  # (launch, block, warp, line, allocation, kind, step, k) -> set of sectors or words
        shared_requests: set = set()
        origins: dict = {}  # id(array wrapper) -> (allocation id, offset, strides, itemsize, ndim, shared)
        keep = []  # the wrappers whose ids are keys above stay alive while counting
        launch, block = -1, None
        for entry in self.log:
            if entry.__class__ is str:  # a launch
                launch += 1
                steps = {}
                names.append(entry)
                continue
            if len(entry) == 2:
                if entry[0] is None:  # (None, the block's index): a block starts
                    block = entry[1]
                    steps = {}
                else:  # (thread id, WARP_STEP): the lane passed a barrier or a full-warp collective
                    steps[entry[0]] = steps.get(entry[0], 0) + 1
                continue
            if len(entry) == 7:  # a wide access (course.wide): one access of that many bytes
                tid, code, line, arr, idx, what, width = entry
            else:
                tid, code, line, arr, idx, what = entry
                width = 0
            o = origins.get(id(arr))
            if o is None:
                keep.append(arr)
                o = origins[id(arr)] = _origin(arr, shared_cls)
            alloc, offset, strides, size, ndim, shared = o
            index = _int_index(idx, ndim)
            if index is None:
                continue
            start = offset
            for i, st in zip(index, strides):
                start += i * st
            unit = 4 if shared else SECTOR
            units = range(start // unit, (start + (width or size) - 1) // unit + 1)
            for kind in ((LOAD, STORE) if what == ATOMIC else (what,)):
                step = steps.get(tid, 0)
                key = (launch, block, tid, code, line, alloc, kind, step)
                k = executions.get(key, 0)
                executions[key] = k + 1
                req = (launch, block, tid >> 5, code, line, alloc, kind, step, k)
                got = requests.get(req)
                if got is None:
                    # a shared atomic keeps every lane's words: lanes on one address are served one
                    # after another, not broadcast
                    got = requests[req] = [] if (shared and what == ATOMIC) else set()
                    if shared:
                        shared_requests.add(req)
                if got.__class__ is list:
                    got.extend(units)
                else:
                    got.update(units)
        out: dict[str, KernelTraffic] = {}
        for name in names:
            out.setdefault(name, KernelTraffic(name)).launches += 1
        for req, units in requests.items():
            k = out[names[req[0]]]
            if req in shared_requests:
                k.shared_requests += 1
                k.shared_wavefronts += wavefronts(units)
            elif req[6] == LOAD:
                k.global_load_requests += 1
                k.global_load_sectors += len(units)
            else:
                k.global_store_requests += 1
                k.global_store_sectors += len(units)
        return list(out.values())

    @property
    def kernels(self) -> list[KernelTraffic]:
        """One entry per kernel, in the order of its first launch (counted once, then kept)."""
        if self._counted is None or self._counted[0] != len(self.log):
            self._counted = (len(self.log), self._count())
        return self._counted[1]

    @property
    def total(self) -> KernelTraffic:
        total = KernelTraffic("total")
        for k in self.kernels:
            total.add(k)
        return total

    def kernel(self, name: str) -> KernelTraffic:
        for k in self.kernels:
            if k.name == name:
                return k
        known = ", ".join(k.name for k in self.kernels) or "none"
        raise KeyError(f"no kernel {name!r} was launched while recording (launched: {known})")


def wavefronts(words) -> int:
    """Shared-memory wavefronts for one request touching these 4-byte words: a set (distinct words,
    lanes on one word share it) or, for an atomic, a list (every lane's word: one pass each)."""
    per_bank: dict[int, int] = {}
    for w in words:
        b = w % BANKS
        per_bank[b] = per_bank.get(b, 0) + 1
    most = max(per_bank.values(), default=0)
    return max(most, -(-len(words) * 4 // WAVEFRONT_BYTES))


@contextlib.contextmanager
def record():
    """Record the memory traffic of every kernel launched inside the block (simulator only)."""
    if DEVICE.kind != "sim":
        raise RuntimeError("memory traffic is measured in the simulator (COURSE_DEVICE=sim); on a GPU, Nsight "
                           "Compute counts the same: ncu --metrics l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum")
    from course import simulator

    rec = Recording()
    simulator.start_recording(rec)
    try:
        yield rec
    finally:
        simulator.stop_recording()


@dataclass
class VersionTraffic:
    """One version of a day, run once in the simulator: its kernels' traffic and the day's minimum."""

    version: str
    kernels: list[KernelTraffic] = field(default_factory=list)
    total: KernelTraffic | None = None
    minimum_bytes: int | None = None


def measure_day(module, solution, n, versions=None) -> list[VersionTraffic]:
    """Run each version of a day once at size ``n`` while recording; the inputs and the minimum bytes
    come from the solution (``make_inputs``, ``traffic``)."""
    from course import days

    inputs = solution.make_inputs(n, seed=0)
    minimum = solution.traffic(*inputs)[0] if hasattr(solution, "traffic") else None
    out = []
    for version in versions or days.sim_versions(solution):
        with record() as rec:
            getattr(module, version)(*inputs)
        out.append(VersionTraffic(version, rec.kernels, rec.total, minimum))
    return out
