"""Day 12 exercise: local memory and spills -- a 1D median filter of width 9 (edges repeat the end values).

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

What you write (each raises NotImplementedError with its hint until you do):
  median_sort_kernel     load the clamped window into a local array, insertion-sort it, write w[RADIUS] (16 lines)
  _median9               _sort3 each row of three; the median of (max of the minima, median of the medians, min of
                         the maxima) (8 lines)
  median_network_kernel  edge samples with clamped loads, then a grid-stride interior loop on an unsigned index (16
                         lines)
Everything else in this file is given. Grade with:  make check DAY=12
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
    raise NotImplementedError("Day 12: load the clamped window into a local array, insertion-sort it, write w[RADIUS] "
                              "(16 lines)")


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
    raise NotImplementedError("Day 12: _sort3 each row of three; the median of (max of the minima, median of the "
                              "medians, min of the maxima) (8 lines)")


@cuda.jit
def median_network_kernel(x, out):
    """The same median as the naive kernel with no array at all: nine named values and _median9,
    no run-time index anywhere, so the stack frame must be 0 bytes.

    The loads: threads t < 2 * RADIUS each compute one edge sample (i = t, or n - 2 * RADIUS + t;
    skip i outside 0..n-1) with indices clamped to [0, n - 1]. Then a grid-stride loop over an
    unsigned j = uint64(t) while j + 2 * RADIUS < n writes out[j + RADIUS] from x[j .. j + 8] with no
    clamping (write the offsets as uint64(k): a signed index costs a wrap-around check per load).
    """
    raise NotImplementedError("Day 12: edge samples with clamped loads, then a grid-stride interior loop on an "
                              "unsigned index (16 lines)")


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
