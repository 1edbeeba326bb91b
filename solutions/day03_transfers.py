"""Day 03: host <-> device transfers -- `steps` SAXPY updates y <- a * x + y on host (NumPy) data.

v1 naive      each step is a self-contained call: copy x and y to the device, launch, copy y back.
              Every step pays 12 bytes per element over PCIe (~8 GB/s up, ~15 GB/s down from
              pageable memory) for 12 bytes per element of HBM traffic (~4.1 TB/s).
v2 optimized  the data stays on the device: x and y go up once, the `steps` launches work on the
              resident copy, y comes back once. The host arrays are page-locked for the copies
              (`cuda.pinned`), so the DMA engines read and write them directly at ~55 GB/s instead
              of going through the driver's pageable staging buffer.

Both versions launch the same grid-stride kernel: the day is about where the bytes travel, not
about the kernel. With device arrays as inputs there is nothing to transfer and both run the same
launches; the benchmark therefore passes NumPy inputs (BENCH_HOST_INPUTS).

Napkin math (n = 2^25, steps = 8, rates measured on an H200 host): naive moves 8 x 384 MB over
PCIe, ~31 ms up (pageable, ~8 GB/s) + ~9 ms down (~15 GB/s) per step, ~0.32 s in all (measured:
0.58 s, page faults included); optimized moves 384 MB once at ~55 GB/s (~7 ms) after locking
x, y and the result (~14 ms for x and y, ~30 ms for the fresh result): measured 44 ms, 13x faster.
The 8 kernels (~0.1 ms each) are noise in both.
"""

import contextlib

import numpy as np

from course import cuda, launch

TITLE = "Host <-> device transfers: keep the data where the work is"
MEMORY_SPACE = "global"
VERSIONS = ("naive", "optimized")
TEST_SIZES = (1, 255, 257, 1021, 4099)  # one element, a block -1 and +1, primes
BENCH_SIZES = (1 << 25,)  # 128 MB per array: every naive step moves 384 MB over PCIe
BOUND = "memory"
BENCH_HOST_INPUTS = True  # time the whole host function on NumPy inputs: the transfers are the point
STEPS = 8
THREADS = 256
UNROLL = 4


def make_inputs(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    a = float(rng.uniform(0.25, 0.75))
    steps = STEPS if n >= 1 << 16 else 3  # 3 at test sizes: each simulated launch costs ~0.1 s
    return x, y, a, steps


def reference(x, y, a, steps):
    x64, out = x.astype(np.float64), y.astype(np.float64)
    for _ in range(steps):
        out = np.float32(a).astype(np.float64) * x64 + out
    return out.astype(np.float32)


def traffic(x, y, a, steps):
    """(minimum bytes moved through device memory, floating-point operations): `steps` kernels,
    each reading x and y and writing y."""
    return steps * 3 * x.nbytes, steps * 2 * x.size


def host_link_bytes(x, y, a, steps):
    """Minimum bytes over the host link (PCIe): x and y up once, y down once."""
    return 3 * x.nbytes


@cuda.jit
def saxpy_kernel(a, x, y, out):
    """out[i] = a * x[i] + y[i] for every i, with a grid-stride loop (the grid is sized to the GPU,
    not to n). `out` may be the same array as `y`: each element is read before the same thread
    writes it, so updating in place is safe.

    Four elements a trip (i, i + stride, i + 2*stride, i + 3*stride), all eight loads before the four
    stores, then a tail loop one element at a time.
    """
    # EXERCISE: a grid-stride loop writing out[i] = a * x[i] + y[i], four elements a trip, then the tail
    n = out.size
    stride = cuda.gridsize(1)
    i = cuda.grid(1)
    # Four elements a trip, stride apart: coalesced at every step, eight independent loads in flight.
    while i + 3 * stride < n:
        x0, x1, x2, x3 = x[i], x[i + stride], x[i + 2 * stride], x[i + 3 * stride]
        y0, y1, y2, y3 = y[i], y[i + stride], y[i + 2 * stride], y[i + 3 * stride]
        out[i] = a * x0 + y0
        out[i + stride] = a * x1 + y1
        out[i + 2 * stride] = a * x2 + y2
        out[i + 3 * stride] = a * x3 + y3
        i += 4 * stride
    while i < n:
        out[i] = a * x[i] + y[i]
        i += stride


_SIG = "void(float32, float32[::1], float32[::1], float32[::1])"
KERNELS = {"naive": (saxpy_kernel, _SIG), "optimized": (saxpy_kernel, _SIG)}


def _check(x, y, a, steps):
    launch.check_array("x", x, dtype=np.float32, ndim=1)
    launch.check_array("y", y, dtype=np.float32, shape=x.shape)
    if not isinstance(a, (float, int, np.floating, np.integer)):
        raise ValueError(f"a: expected a real scalar, got {type(a).__name__}")
    if not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValueError(f"steps: expected an integer >= 1, got {steps!r}")


def _grid(n: int) -> int:
    return launch.grid_stride_blocks(launch.blocks(n, UNROLL), THREADS)


def naive(x, y, a, steps):
    _check(x, y, a, steps)
    a = np.float32(a)
    for _ in range(steps):
        # A library call that takes and returns NumPy arrays hides this round trip in every call.
        d_x, d_y = launch.to_device(x, y)
        out = launch.empty(x.shape, np.float32)
        saxpy_kernel[_grid(x.size), THREADS](a, d_x, d_y, out)
        y = launch.result(out, x, y)
    return y


def optimized(x, y, a, steps):
    """The same result as naive, with the data resident on the device between steps.

    - copy x and y to the device once (launch.to_device), allocate out with launch.empty;
    - launch saxpy_kernel `steps` times with np.float32(a): the first reads d_y, the others read and
      write out;
    - NumPy inputs: return a NumPy result, copied back once with out.copy_to_host(result), where
      result = np.empty_like(y); device inputs: return out (it stays on the device);
    - page-lock the host arrays (x, y, result) while they are copied, with cuda.pinned(array) for
      each (a contextlib.ExitStack holds several), so the copies run at the DMA rate.
    Never write into the caller's y.
    """
    _check(x, y, a, steps)
    # EXERCISE: upload once, `steps` launches on device data, download once into a page-locked result
    a = np.float32(a)
    host = launch.on_host(x, y)
    result = np.empty_like(y) if host else None
    # Page-locked for the duration: the copy engines DMA straight from and into these pages
    # (~55 GB/s, not ~8 up and ~15 down through the driver's staging buffer). Locking costs time
    # too (~7 ms per 128 MB already touched, more for the fresh result's pages, which must be faulted
    # in either way), so it pays only for large copies like these.
    with contextlib.ExitStack() as locked:
        for array in (x, y, result) if host else ():
            locked.enter_context(cuda.pinned(array))
        d_x, d_y = launch.to_device(x, y)
        out = launch.empty(x.shape, np.float32)
        blocks = _grid(x.size)
        saxpy_kernel[blocks, THREADS](a, d_x, d_y, out)  # the first step reads y, the rest update out
        for _ in range(steps - 1):
            saxpy_kernel[blocks, THREADS](a, d_x, out, out)  # elementwise: reading and writing out is safe
        if not host:
            return out
        out.copy_to_host(result)
    return result


def library(x, y, a, steps):
    """The same updates as CuPy expressions on device-resident data, one upload and one download."""
    import cupy

    d_x, out = cupy.asarray(x), cupy.array(y, copy=True)
    a = np.float32(a)
    for _ in range(steps):
        out = a * d_x + out
    return cupy.asnumpy(out) if launch.on_host(x, y) else out
