"""Day 12 (WRONG): local memory and spills -- a 1D median filter of width 9 (edges repeat the end values).

MISTAKE: the "optimized" kernel keeps the window in a local array and selects the median with a
run-time index (partial selection sort): still correct, but the array spills to local memory.

v1 naive      copy the window into a per-thread array and insertion-sort it: the sort indexes the
              array with run-time values, registers cannot be indexed, so the array lives in local
              memory (a stack frame in device memory, cached in L1) and every compare is a load.
v2 optimized  the same nine values as nine scalars and a fixed network of min/max: every "index" is
              known at compile time, so all of it stays in registers (stack frame 0); grid-stride.

Napkin math: 8 bytes a sample through DRAM (the window's other 8 reads hit L1), 30 min/max a sample.
n = 2^27 moves 1.07 GB, ~0.26 ms at the H200's ~4.1 TB/s copy rate. Measured on an H200: naive
12.1 ms, optimized 1.47 ms (8.3x; 17 % of the copy rate: now bound by ~130 instructions a sample,
a third of them Numba's wrap-around handling of possibly negative indices).
"""

import numpy as np

from course import cuda, launch  # first: course picks GPU or simulator before numba loads
from numba import float32

TITLE = "Local memory and spills"
MEMORY_SPACE = "local"
VERSIONS = ("naive", "optimized")
RADIUS = 4
WIDTH = 2 * RADIUS + 1
TEST_SIZES = (1, 5, 255, 257, 1021, 2053)  # shorter than the window, a block -1 and +1, primes
BENCH_SIZES = (1 << 27,)  # 537 MB in, 537 MB out: ~18x the 60 MB L2
BOUND = "memory"
THREADS = 256


def make_inputs(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n, dtype=np.float32)
    # Spikes every so often: what a median filter is for, and a check that it removes them.
    spikes = rng.random(n) < 0.05
    x[spikes] += np.float32(50.0)
    return (x,)


def reference(x):
    padded = np.pad(x, RADIUS, mode="edge")
    windows = np.lib.stride_tricks.sliding_window_view(padded, WIDTH)  # (n, WIDTH)
    return np.median(windows, axis=1).astype(np.float32)


def traffic(x):
    """(minimum bytes moved through device memory, operations: the network's 30 min/max)."""
    return 2 * x.nbytes, 30 * x.size


@cuda.jit
def median_sort_kernel(x, out):
    n = x.size
    i = cuda.grid(1)
    if i >= n:
        return
    w = cuda.local.array(WIDTH, float32)
    for k in range(WIDTH):
        j = min(max(i + k - RADIUS, 0), n - 1)  # clamp: the edges repeat the end values
        w[k] = x[j]
    # Insertion sort: `j` depends on the data, so w[j] cannot be a fixed register: the array goes
    # to local memory and each step is a load/store through L1.
    for k in range(1, WIDTH):
        v = w[k]
        j = k - 1
        while j >= 0 and w[j] > v:
            w[j + 1] = w[j]
            j -= 1
        w[j + 1] = v
    out[i] = w[RADIUS]


@cuda.jit(device=True, inline=True)
def _sort3(a, b, c):
    """(min, median, max) of three values with six min/max: no branches, no indexing."""
    lo = min(a, b)
    hi = max(a, b)
    med = max(lo, min(hi, c))
    return min(lo, c), med, max(hi, c)


@cuda.jit
def median_network_kernel(x, out):
    n = x.size
    last = n - 1
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        win = cuda.local.array(WIDTH, float32)
        for k in range(WIDTH):
            win[k] = x[min(max(i + k - RADIUS, 0), last)]
        for a in range(RADIUS + 1):
            m = a
            for k in range(a + 1, WIDTH):
                if win[k] < win[m]:
                    m = k
            t = win[a]
            win[a] = win[m]
            win[m] = t
        med = win[RADIUS]
        out[i] = med
        i += stride


_SIG = "void(float32[::1], float32[::1])"
KERNELS = {"naive": (median_sort_kernel, _SIG), "optimized": (median_network_kernel, _SIG)}


def _check(x):
    launch.check_array("x", x, dtype=np.float32, ndim=1)
    if x.size == 0:
        raise ValueError("x: expected at least one element, got an empty array")


def naive(x):
    _check(x)
    (d_x,) = launch.to_device(x)
    out = launch.empty(x.shape, np.float32)
    median_sort_kernel[launch.blocks(x.size, THREADS), THREADS](d_x, out)
    return launch.result(out, x)


def optimized(x):
    _check(x)
    (d_x,) = launch.to_device(x)
    out = launch.empty(x.shape, np.float32)
    median_network_kernel[launch.grid_stride_blocks(x.size, THREADS), THREADS](d_x, out)
    return launch.result(out, x)


def library(x):
    """The same filter through CuPy's SciPy-compatible ndimage (a row of the benchmark table)."""
    import cupy
    import cupyx.scipy.ndimage as ndi

    return ndi.median_filter(cupy.asarray(x), size=WIDTH, mode="nearest")
