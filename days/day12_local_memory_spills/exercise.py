"""Day 12 exercise: local memory and spills -- a 1D median filter of width 9 (edges repeat the end values).

Write the two kernels; `_sort3` and the host functions are given.
Run `make inspect DAY=12`: the naive kernel should show a stack frame, the optimized one none.
Grade with:  make check DAY=12
"""

import numpy as np

from course import cuda, launch  # first: course picks GPU or simulator before numba loads
from numba import float32, uint64  # noqa: F401  (for your kernels)

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
    raise NotImplementedError("Day 12: load the clamped window into a local array, insertion-sort it, "
                              "write w[RADIUS] (14 lines)")


@cuda.jit(device=True, inline=True)
def _sort3(a, b, c):
    """(min, median, max) of three values with six min/max: no branches, no indexing."""
    lo = min(a, b)
    hi = max(a, b)
    med = max(lo, min(hi, c))
    return min(lo, c), med, max(hi, c)


@cuda.jit
def median_network_kernel(x, out):
    """The same median as the naive kernel with no array at all.

    The network: load a window into nine scalars v0..v8, sort each row of three with _sort3, then
    med = median3(max of the three minima, median3 of the three medians, min of the three maxima).
    No run-time index anywhere, so the stack frame must be 0 bytes. (A small inline device function
    `_median9(v0, ..., v8)` keeps the two call sites below short.)

    The loads: threads t < 2 * RADIUS each compute one edge sample (i = t, or n - 2 * RADIUS + t;
    skip i outside 0..n-1) with indices clamped to [0, n - 1]. Then a grid-stride loop over an
    unsigned j = uint64(t) while j + 2 * RADIUS < n writes out[j + RADIUS] from x[j .. j + 8] with no
    clamping (write the offsets as uint64(k): a signed index costs a wrap-around check per load).
    """
    raise NotImplementedError("Day 12: edge samples with clamped loads, then a grid-stride interior loop "
                              "on an unsigned index; nine named values, the _sort3 network (30 lines)")


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
