"""Day 52: unified memory -- page faults, migration and prefetch, on one SAXPY y <- a * x + y of host data.

Every version launches day 03's grid-stride SAXPY kernel (imported): the kernel does not change, only
where its pages are when it runs. Host (NumPy) data in, a NumPy result out, as on day 03.

v1 naive       first touch: x and y are copied into managed memory (`cuda.managed_array`) by the
               host, so every page starts in host DRAM; the kernel then touches them on the GPU. Each
               touch of a page that is not in HBM is a fault: the SM's access stalls, the fault goes to
               the driver on the CPU, which migrates the page (and, when faults are dense, its
               neighbours) over PCIe, maps it and replays the access. The result is read back by the
               host the same way: its reads fault y's pages back one piece at a time.
v2 prefetched  the same managed buffers, but told where they are going: x (only read) is advised
               read-mostly (`cudaMemAdvise`), both are prefetched to the GPU (`cudaMemPrefetchAsync`)
               before the kernel, and y is prefetched back to the host after it. Prefetch migrates
               whole ranges with the copy engines in large DMA transfers, no fault on the critical
               path; the kernel then runs on resident pages at HBM speed.
v3 device      the baseline without managed memory: explicit copies (`cuda.to_device`, pageable, as
               day 03's single round trip), the kernel on device arrays, one copy back.

Napkin math (n = 2^26 float32: x and y 256 MB each): every version moves x and y up and y down,
768 MB over PCIe Gen 5 x16 (~55 GB/s measured page-locked on day 03, ~8 up / ~15 down pageable):
~14 ms at the DMA rate; the kernel on resident pages moves 805 MB through HBM, ~0.2 ms at ~4.1 TB/s.
So the kernel is noise; what counts is how the 768 MB cross the link. Prefetch should come near the
DMA rate; first touch pays a fault round trip (GPU -> driver -> migrate -> map -> replay) per
migrated piece, and the kernel's warps stall on each: its rate, per GB, is what
`first_touch_vs_prefetch` measures. The copies into managed memory cost all versions but v3 a host
memcpy (the host's first touch of fresh managed pages).
Measured on the H200 (PCIe): first touch 155-178 ms per GB of x and y (852 at 0.25 GB), prefetch +
kernel 52-56 ms per GB (~20 GB/s, not the DMA rate), explicit pageable copies 113-122 ms per GB; y's way
back by host faults costs what a prefetch back plus the host's read does. The bench's host functions:
naive 402 ms, prefetched 350 ms, device 135 ms. host_touch_cost(1.0) (x and y 512 MB each; a later
run): the kernel on resident pages 0.62 ms; after the host reads and writes y every 4 KB (131,072
pages) the host takes 145.6 ms and the next kernel 82.2 ms, ~164 ms per GB of y, first touch's rate;
every 64 KB, host 101.8 ms, kernel 70.2 ms (85 % of the 4 KB cost for 1/16 of the touches: a host
fault moves 64 KB or more); every 2 MB, host 9.0 ms, kernel 15.5 ms. The read-mostly x read every 4 KB:
host 2.1 ms, the next kernel 0.78 ms (the GPU keeps its copy). (An earlier run's y rows moved no page:
they assigned a view to itself, which NumPy skips; they now add zero, a real read and write.)

In the simulator there is no managed memory and no driver: plain NumPy arrays stand in for managed
ones and `runtime()` records the advice and prefetch calls instead of making them, so the kernel
and the calls are graded there; the real thing runs on a GPU (the gpu-marked tests, the bench, and
the lesson's `first_touch_vs_prefetch` and `host_touch_cost`).
"""

import gc
import time

import numpy as np

from course import ON_GPU, cuda, launch
from solutions.day03_transfers import THREADS, UNROLL, saxpy_kernel

TITLE = "Unified memory: page faults, migration, prefetch"
MEMORY_SPACE = "global"
VERSIONS = ("naive", "prefetched", "device")
TEST_SIZES = (1, 255, 257, 1021, 4099)  # one element, a block -1 and +1, primes
BENCH_SIZES = (1 << 26,)  # 256 MB per array: 768 MB over PCIe per call, the kernel ~0.2 ms of it
BOUND = "memory"
BENCH_HOST_INPUTS = True  # time the whole host function on NumPy inputs: where the pages are is the point
STREAM = 0  # the legacy default stream: Numba launches there and CuPy's runtime calls take it as 0
PAGE = 4096  # the host's page: the smallest piece the driver maps and migrates
PATTERN = 1024  # the lesson's buffers repeat a 1024-element pattern: filled fast, checked exactly


def make_inputs(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    a = float(rng.uniform(0.25, 0.75))
    return x, y, a


def reference(x, y, a):
    return (np.float32(a).astype(np.float64) * x.astype(np.float64) + y.astype(np.float64)).astype(np.float32)


def traffic(x, y, a):
    """(minimum bytes moved through device memory, floating-point operations): read x and y, write y."""
    return 3 * x.nbytes, 2 * x.size


def host_link_bytes(x, y, a):
    """Minimum bytes over the host link (PCIe), in every version: x and y up, y down."""
    return 3 * x.nbytes


_SIG = "void(float32, float32[::1], float32[::1], float32[::1])"
KERNELS = {"naive": (saxpy_kernel, _SIG), "prefetched": (saxpy_kernel, _SIG), "device": (saxpy_kernel, _SIG)}


# ---- managed memory and the runtime calls, on a GPU or in the simulator -----------------------------

class SimRuntime:
    """The CUDA runtime's unified-memory calls as the simulator sees them: there are no pages to move,
    so each call only records what it was asked (``calls``), with the same names and constants as
    ``cupy.cuda.runtime``."""

    cudaMemAdviseSetReadMostly = 1
    cudaMemAdviseSetPreferredLocation = 3
    cudaCpuDeviceId = -1

    def __init__(self):
        self.calls = []

    def getDevice(self):
        return 0

    def memAdvise(self, ptr, count, advice, device):
        self.calls.append(("advise", ptr, count, advice, device))

    def memPrefetchAsync(self, ptr, count, dst, stream):
        self.calls.append(("prefetch", ptr, count, dst, stream))


_SIM_RUNTIME = SimRuntime()


class GpuRuntime:
    """`cupy.cuda.runtime` (cudaMemAdvise, cudaMemGetInfo, ...), with a prefetch to the host that works
    on CUDA 13 too: there cudaMemPrefetchAsync takes a location (a device, or the host) instead of a
    device ordinal, and CuPy 14 passes the ordinal as a device location, so cudaCpuDeviceId (-1) is
    refused ("invalid device ordinal"). A prefetch to the host then goes through cuda-python's binding
    with a host location; every other call is CuPy's."""

    def __init__(self):
        import cupy

        self._rt = cupy.cuda.runtime

    def __getattr__(self, name):
        return getattr(self._rt, name)

    def memPrefetchAsync(self, ptr, count, dst, stream):
        if dst != self._rt.cudaCpuDeviceId or self._rt.runtimeGetVersion() < 13000:
            return self._rt.memPrefetchAsync(ptr, count, dst, stream)
        from cuda.bindings import runtime as cudart

        where = cudart.cudaMemLocation()
        where.type = cudart.cudaMemLocationType.cudaMemLocationTypeHost
        where.id = 0
        (err,) = cudart.cudaMemPrefetchAsync(ptr, count, where, 0, stream)
        if err != cudart.cudaError_t.cudaSuccess:
            raise RuntimeError(f"cudaMemPrefetchAsync to the host: {err}")


def runtime():
    """The CUDA runtime's unified-memory calls (GpuRuntime: CuPy's, cudaMemPrefetchAsync to the host
    made to work on CUDA 13) on a GPU, the recording stand-in in the simulator."""
    if not ON_GPU:
        return _SIM_RUNTIME
    return GpuRuntime()


def managed_empty(n: int, dtype=np.float32):
    """n elements of managed memory: one address, valid on the host and the GPU, whose pages the driver
    moves to whichever side touches them. Returns the array to launch with (Numba's ManagedNDArray,
    which a kernel takes as device memory); `host(array)` is its NumPy view. Nothing is placed yet: a
    page gets physical memory where it is first touched. In the simulator, a NumPy array."""
    if not ON_GPU:
        return np.empty(n, dtype=dtype)
    return cuda.managed_array(n, dtype=dtype)


def managed_copy(a: np.ndarray):
    """A managed copy of host array a, written by the host: every page starts in host DRAM."""
    m = managed_empty(a.size, a.dtype)
    host(m)[...] = a
    return m


def host(m) -> np.ndarray:
    """The plain NumPy view of a managed array (the same pages; reads and writes on the host)."""
    return np.ndarray.view(m, np.ndarray)


def address(m) -> int:
    """The managed allocation's address: one virtual address, the same on the host and the GPU."""
    return host(m).ctypes.data


# ---- the versions -------------------------------------------------------------------------------------

def _check(x, y, a, *, host_only: bool):
    launch.check_array("x", x, dtype=np.float32, ndim=1)
    launch.check_array("y", y, dtype=np.float32, shape=x.shape)
    if not isinstance(a, (float, int, np.floating, np.integer)):
        raise ValueError(f"a: expected a real scalar, got {type(a).__name__}")
    if host_only and not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray)):
        raise ValueError(f"x, y: expected NumPy (host) arrays, got {type(x).__name__} and {type(y).__name__}: "
                         "this version puts host data into managed memory; `device` takes device arrays")


def _grid(n: int) -> int:
    return launch.grid_stride_blocks(launch.blocks(n, UNROLL), THREADS)


def naive(x, y, a):
    """First touch: y <- a * x + y with x and y in managed memory that the host wrote, so the GPU faults
    every page over on first touch, and the host's read of the result faults them back.

    - mx, my = managed_copy(x), managed_copy(y): the host's writes place every page in host DRAM;
    - launch saxpy_kernel with np.float32(a) on (mx, my, my): the kernel reads and writes the managed
      arrays themselves (never host(...) views: Numba would copy a NumPy array over and back);
    - cuda.synchronize() before the host reads: managed pages the GPU may still be writing are not
      the host's to read;
    - return a NumPy copy of the result, np.array(host(my)): its reads are the host's first touch.
    No advice, no prefetch: the driver learns where the pages are needed only from the faults.
    """
    _check(x, y, a, host_only=True)
    # EXERCISE: managed copies of x and y written by the host, the kernel on them, synchronize, copy the result out
    mx, my = managed_copy(x), managed_copy(y)
    saxpy_kernel[_grid(x.size), THREADS](np.float32(a), mx, my, my)  # every page faults on first touch
    cuda.synchronize()  # managed memory is the host's again only once the GPU is done with it
    return np.array(host(my))  # host reads of GPU-resident pages: each one a fault back over PCIe


def prefetched(x, y, a):
    """The same managed buffers, moved before they are needed: no fault on the kernel's path.

    - mx, my = managed_copy(x), managed_copy(y); rt = runtime(); dev = rt.getDevice();
    - rt.memAdvise(address(mx), mx.nbytes, rt.cudaMemAdviseSetReadMostly, dev): x is only read, so
      the driver may keep copies of its pages on both sides (a later host read does not pull it
      back); y is written, and read-mostly pages that are written collapse to one copy: no advice;
    - rt.memPrefetchAsync(address(m), m.nbytes, dev, STREAM) for mx and my, then the kernel, as naive;
    - rt.memPrefetchAsync(address(my), my.nbytes, rt.cudaCpuDeviceId, STREAM): y back to the host in
      one bulk transfer, queued behind the kernel on the same stream;
    - cuda.synchronize(), then return np.array(host(my)).
    Every count is in BYTES (m.nbytes), never elements: a prefetch of m.size bytes moves a quarter of
    a float32 array and leaves the rest to faults.
    """
    _check(x, y, a, host_only=True)
    # EXERCISE: advise x read-mostly, prefetch x and y to the GPU, the kernel, prefetch y to the host, synchronize
    mx, my = managed_copy(x), managed_copy(y)
    rt = runtime()
    dev = rt.getDevice()
    rt.memAdvise(address(mx), mx.nbytes, rt.cudaMemAdviseSetReadMostly, dev)
    # Bulk migration by the copy engines, queued on the kernel's stream: the pages are resident in
    # HBM before the first warp runs, in DMA-sized pieces rather than one fault at a time.
    rt.memPrefetchAsync(address(mx), mx.nbytes, dev, STREAM)
    rt.memPrefetchAsync(address(my), my.nbytes, dev, STREAM)
    saxpy_kernel[_grid(x.size), THREADS](np.float32(a), mx, my, my)
    rt.memPrefetchAsync(address(my), my.nbytes, rt.cudaCpuDeviceId, STREAM)  # only y: x did not change
    cuda.synchronize()
    return np.array(host(my))


optimized = prefetched  # the day's optimized version


def device(x, y, a):
    """The baseline without managed memory: explicit copies up (pageable NumPy, as day 03), the kernel
    on device arrays, one copy back. Device arrays in: the result stays on the device."""
    _check(x, y, a, host_only=False)
    d_x, d_y = launch.to_device(x, y)
    out = launch.empty(x.shape, np.float32)
    saxpy_kernel[_grid(x.size), THREADS](np.float32(a), d_x, d_y, out)
    return launch.result(out, x, y)


# ---- what the lesson measures on a GPU ----------------------------------------------------------------

def _require_gpu(name: str) -> None:
    if not ON_GPU:
        raise RuntimeError(f"{name} measures managed memory and page migration: it needs a CUDA GPU "
                           "(the simulator has neither)")


def _elements(gb: float) -> int:
    """Elements per array for gb GB of x and y together, a multiple of PATTERN (at least one pattern)."""
    return max(PATTERN, int(gb * (1 << 30) / 8) // PATTERN * PATTERN)


def _clip(gb_sizes) -> list[float]:
    """The sizes, each at most 40 % of free device memory and a quarter of host memory: every page
    must fit in HBM, or the kernel evicts what it migrated (oversubscription is another experiment)."""
    free, _ = runtime().memGetInfo()
    try:
        import os

        host_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        host_bytes = free
    limit = min(0.4 * free, 0.25 * host_bytes) / (1 << 30)
    return sorted({round(min(float(gb), limit), 4) for gb in gb_sizes})


def _filled(n: int, rng):
    """Managed x and y of n elements, written by the host (pages in host DRAM), and their patterns."""
    px = rng.standard_normal(PATTERN, dtype=np.float32)
    py = rng.standard_normal(PATTERN, dtype=np.float32)
    mx, my = managed_empty(n), managed_empty(n)
    host(mx).reshape(-1, PATTERN)[...] = px
    host(my).reshape(-1, PATTERN)[...] = py
    return mx, my, px, py


def _verify(my, px, py, a, steps: int, what: str) -> None:
    """The managed y after `steps` kernels, read on the host (after every timing that mattered)."""
    cuda.synchronize()
    want = py.astype(np.float64)
    for _ in range(steps):
        want = (np.float32(a) * px + want.astype(np.float32)).astype(np.float64)
    got = host(my).reshape(-1, PATTERN)
    if not np.allclose(got, want.astype(np.float32), rtol=1e-5, atol=1e-6):
        raise AssertionError(f"{what}: the managed result differs from {steps} SAXPY steps on the pattern")


def _release() -> None:
    """Free what the last size allocated now, not at Numba's next batch of frees."""
    gc.collect()
    ctx = cuda.current_context()
    ctx.memory_manager.deallocations.clear()  # managed frees are queued by the memory manager (EMM or Numba's)
    import cupy

    cupy.get_default_memory_pool().free_all_blocks()


def _ms(e0, e1) -> float:
    return cuda.event_elapsed_time(e0, e1)


def first_touch_vs_prefetch(gb_sizes=(0.25, 1.0, 4.0), a: float = 0.5, seed: int = 0) -> list[dict]:
    """For each size (GB of x and y together, clipped to fit in free device memory): the kernel on
    managed pages the host wrote (first touch: faults and migration), the same with advice and
    prefetch first (the prefetch and the kernel timed apart), the kernel on resident pages, the result
    brought back by host faults or by a prefetch, and explicit pageable copies of the same bytes.
    Times in ms (CUDA events; host reads by the clock), and ms per GB for the two that matter. Every
    result is checked. GPU only."""
    _require_gpu("first_touch_vs_prefetch")
    rt = runtime()
    dev = rt.getDevice()
    rng = np.random.default_rng(seed)
    rows = []
    for gb in _clip(gb_sizes):
        n = _elements(gb)
        row = {"gb": 8 * n / (1 << 30), "n": n}
        e = [cuda.event() for _ in range(3)]
        k = (_grid(n), THREADS)

        # v1: first touch on the GPU, then the kernel again on the pages it migrated, then host reads.
        mx, my, px, py = _filled(n, rng)
        e[0].record()
        saxpy_kernel[k](np.float32(a), mx, my, my)
        e[1].record()
        saxpy_kernel[k](np.float32(a), mx, my, my)
        e[2].record()
        e[2].synchronize()
        row["first_touch_ms"], row["resident_kernel_ms"] = _ms(e[0], e[1]), _ms(e[1], e[2])
        t = time.perf_counter()
        float(host(my).sum(dtype=np.float64))  # the host reads every page of y: faults them back
        row["host_read_by_faults_ms"] = (time.perf_counter() - t) * 1e3
        _verify(my, px, py, a, 2, "first touch")
        del mx, my
        _release()

        # v2: advice and prefetch, the kernel, y prefetched back, then the same host reads.
        mx, my, px, py = _filled(n, rng)
        e[0].record()
        rt.memAdvise(address(mx), mx.nbytes, rt.cudaMemAdviseSetReadMostly, dev)
        rt.memPrefetchAsync(address(mx), mx.nbytes, dev, STREAM)
        rt.memPrefetchAsync(address(my), my.nbytes, dev, STREAM)
        e[1].record()
        saxpy_kernel[k](np.float32(a), mx, my, my)
        e[2].record()
        e[2].synchronize()
        row["prefetch_ms"], row["kernel_after_prefetch_ms"] = _ms(e[0], e[1]), _ms(e[1], e[2])
        row["prefetched_ms"] = _ms(e[0], e[2])
        e[0].record()
        rt.memPrefetchAsync(address(my), my.nbytes, rt.cudaCpuDeviceId, STREAM)
        e[1].record()
        e[1].synchronize()
        row["prefetch_to_host_ms"] = _ms(e[0], e[1])
        t = time.perf_counter()
        float(host(my).sum(dtype=np.float64))
        row["host_read_resident_ms"] = (time.perf_counter() - t) * 1e3
        _verify(my, px, py, a, 1, "prefetched")
        del mx, my
        _release()

        # v3: the same bytes up by explicit copies from pageable NumPy arrays (day 03's baseline).
        hx, hy = np.empty(n, np.float32), np.empty(n, np.float32)
        hx.reshape(-1, PATTERN)[...] = px
        hy.reshape(-1, PATTERN)[...] = py
        e[0].record()
        d_x, d_y = cuda.to_device(hx), cuda.to_device(hy)
        e[1].record()
        e[1].synchronize()
        row["explicit_copy_ms"] = _ms(e[0], e[1])
        del d_x, d_y, hx, hy
        _release()

        for key in ("first_touch_ms", "prefetched_ms", "explicit_copy_ms"):
            row[key.replace("_ms", "_ms_per_gb")] = row[key] / row["gb"]
        rows.append(row)
    return rows


def host_touch_cost(gb: float = 1.0, strides=(PAGE, 64 << 10, 2 << 20), a: float = 0.5, seed: int = 0) -> dict:
    """The cost of touching managed memory from the host between kernels. x (advised read-mostly) and y
    are prefetched to the GPU and one kernel warms them; then, for each stride in bytes, the host reads
    and writes back one element of y every `stride` bytes and the next kernel is timed: the pages the
    host touched went to the host, and the kernel faults them back. Then the same for host READS of x
    only, every PAGE bytes: with read-mostly advice they leave a copy on the GPU. The stride at which
    the kernel's time stops growing shows the driver's migration granularity (measured, not assumed).
    Returns {"gb", "resident_kernel_ms", "rows": [{"stride_bytes", "touched", "pages", "host_ms",
    "kernel_ms"}]}, the result checked at the end. GPU only."""
    _require_gpu("host_touch_cost")
    rt = runtime()
    dev = rt.getDevice()
    (gb,) = _clip((gb,))
    n = _elements(gb)
    rng = np.random.default_rng(seed)
    mx, my, px, py = _filled(n, rng)
    rt.memAdvise(address(mx), mx.nbytes, rt.cudaMemAdviseSetReadMostly, dev)
    rt.memPrefetchAsync(address(mx), mx.nbytes, dev, STREAM)
    rt.memPrefetchAsync(address(my), my.nbytes, dev, STREAM)
    k = (_grid(n), THREADS)
    e0, e1 = cuda.event(), cuda.event()
    steps = [0]

    def timed_kernel(x, y) -> float:
        e0.record()
        saxpy_kernel[k](np.float32(a), x, y, y)
        e1.record()
        e1.synchronize()
        steps[0] += 1
        return _ms(e0, e1)

    timed_kernel(mx, my)  # warm: the kernel compiled, the pages resident
    out = {"gb": 8 * n / (1 << 30), "resident_kernel_ms": timed_kernel(mx, my), "rows": []}
    for touched, m, stride in [("y read+write", my, s) for s in strides] + [("x read (read-mostly)", mx, PAGE)]:
        step = max(1, stride // m.itemsize)
        view = host(m)[::step]  # one element every `stride` bytes
        t = time.perf_counter()
        if m is my:
            view += np.float32(0.0)  # a read and a write of the same value: the page moves to the host
        else:
            float(view.sum(dtype=np.float64))
        host_ms = (time.perf_counter() - t) * 1e3
        out["rows"].append({"stride_bytes": stride, "touched": touched, "pages": view.size, "host_ms": host_ms,
                            "kernel_ms": timed_kernel(mx, my)})
    _verify(my, px, py, a, steps[0], "host_touch_cost")
    del mx, my
    _release()
    return out
