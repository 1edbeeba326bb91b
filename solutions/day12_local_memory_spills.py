"""Day 12: local memory and spills -- a 1D median filter of width 9 (edges repeat the end values).

v1 naive      copy the window into a per-thread array and insertion-sort it: the sort indexes the
              array with run-time values, registers cannot be indexed, so the array lives in local
              memory (a stack frame in device memory, cached in L1) and every compare is a load.
v2 optimized  the same nine values as nine scalars and a fixed network of min/max: every "index" is
              known at compile time, so all of it stays in registers (stack frame 0). Only the 8
              samples whose window reaches past an end clamp their loads; the interior loop
              (grid-stride, unsigned index) loads x[j .. j + 8] from one address with no clamping.

Napkin math: 8 bytes a sample through DRAM (the window's other 8 reads hit L1), 30 min/max a sample.
n = 2^27 moves 1.07 GB, ~0.26 ms at the H200's ~4.1 TB/s copy rate: ~16 SM clocks per warp of 32
samples. Measured on an H200: naive 12.1 ms; a network clamping all nine indices of every window
1.47 ms (17 % of the copy rate: ~130 instructions a sample, a third of them Numba's wrap-around
handling of possibly negative indices). The interior loop here is 53 SASS instructions a sample, 30
of them FMNMX on the half-rate ALU pipe: ~19 clocks of ALU work per warp against DRAM's 16, so the
network itself is the ceiling, at roughly 80 % of the copy rate.
`make inspect DAY=12` shows the naive kernel's stack frame and the optimized kernel's none.
"""

import numpy as np

from course import cuda, launch  # first: course picks GPU or simulator before numba loads
from numba import float32, uint64

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
    """Thread i writes out[i] = median of x[i-4 .. i+4], indices clamped to [0, n-1].

    Copy the window into cuda.local.array(WIDTH, float32), insertion-sort it (a while loop that
    shifts larger values right), and write the middle element. Guard i < n.
    """
    # EXERCISE: load the clamped window into a local array, insertion-sort it, write w[RADIUS]
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


@cuda.jit(device=True, inline=True)
def _median9(v0, v1, v2, v3, v4, v5, v6, v7, v8):
    """Median of nine named values with 30 min/max: sort each row of three with _sort3, then the
    median is the median of (largest row minimum, median of the row medians, smallest row maximum).
    No array and no branch: every value has a fixed register."""
    # EXERCISE: _sort3 each row of three; the median of (max of the minima, median of the medians, min of the maxima)
    l0, m0, h0 = _sort3(v0, v1, v2)
    l1, m1, h1 = _sort3(v3, v4, v5)
    l2, m2, h2 = _sort3(v6, v7, v8)
    lo = max(max(l0, l1), l2)
    hi = min(min(h0, h1), h2)
    _, mid, _ = _sort3(m0, m1, m2)
    _, med, _ = _sort3(lo, mid, hi)
    return med


@cuda.jit
def median_network_kernel(x, out):
    """The same median as the naive kernel with no array at all: nine named values and _median9,
    no run-time index anywhere, so the stack frame must be 0 bytes.

    The loads: threads t < 2 * RADIUS each compute one edge sample (i = t, or n - 2 * RADIUS + t;
    skip i outside 0..n-1) with indices clamped to [0, n - 1]. Then a grid-stride loop over an
    unsigned j = uint64(t) while j + 2 * RADIUS < n writes out[j + RADIUS] from x[j .. j + 8] with no
    clamping (write the offsets as uint64(k): a signed index costs a wrap-around check per load).
    """
    # EXERCISE: edge samples with clamped loads, then a grid-stride interior loop on an unsigned index
    n = x.size
    t = cuda.grid(1)
    # The 2 * RADIUS samples whose window hangs past an end (every sample when n <= 2 * RADIUS):
    # one thread each, loads clamped to [0, n - 1] so the end values repeat.
    if t < 2 * RADIUS:
        i = t if t < RADIUS else n - 2 * RADIUS + t
        if 0 <= i < n:
            last = n - 1
            out[i] = _median9(x[max(i - 4, 0)], x[max(i - 3, 0)], x[max(i - 2, 0)], x[max(i - 1, 0)], x[i],
                              x[min(i + 1, last)], x[min(i + 2, last)], x[min(i + 3, last)], x[min(i + 4, last)])
    # Every other sample, grid-stride: the window x[j .. j + 8] of sample j + RADIUS lies inside x, so
    # no clamping. j is unsigned: a signed index makes Numba add a wrap-around check per load, and
    # clamped indices cost a compare and a select each; here the nine loads share one address,
    # x + 4j, with offsets 0, 4, ..., 32 bytes, and the loop is the 30 min/max plus ~20 instructions.
    # Nine named values, not an array: every one has a fixed register. Neighbouring threads read
    # overlapping windows, so eight of the nine loads hit L1.
    j = uint64(t)
    stride = uint64(cuda.gridsize(1))
    end = uint64(n)
    while j + uint64(2 * RADIUS) < end:
        out[j + uint64(RADIUS)] = _median9(
            x[j], x[j + uint64(1)], x[j + uint64(2)], x[j + uint64(3)], x[j + uint64(4)],
            x[j + uint64(5)], x[j + uint64(6)], x[j + uint64(7)], x[j + uint64(8)])
        j += stride


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
