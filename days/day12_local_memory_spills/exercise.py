"""Day 12 exercise: local memory and spills -- a 1D median filter of width 9 (edges repeat the end values).

v1 naive      copy the window into a per-thread array and insertion-sort it: the sort indexes the
              array with run-time values, registers cannot be indexed, so the array lives in local
              memory (a stack frame in device memory, cached in L1) and every compare is a load.
v2 optimized  four neighbouring outputs per thread from twelve named values and a min/max network
              that shares the work of overlapping windows (_median4): 50 min/max for four medians
              instead of 120. Every "index" is known at compile time, so all of it stays in
              registers (stack frame 0). The loads are staged: each block walks tiles of
              ITEMS * THREADS outputs, loads the tile's span coalesced into shared memory (the next
              tile's loads in flight while this one computes), and stores through shared memory so a
              warp's stores are coalesced too. Only the first and last tile clamp their loads.

Napkin math: 8 bytes a sample through DRAM, n = 2^27 moves 1.07 GB, ~0.26 ms at the H200's
~4.1 TB/s copy rate: ~16 SM clocks per warp of 32 samples (~64 issue slots over four schedulers).
Measured on an H200: naive 12.1 ms; one network per sample (30 min/max, 9 loads from L1, one sample
per thread per grid-stride step) 0.62 ms, 41 % of the copy rate: each thread had one 4-byte load in
flight, ~8 KB per SM where the copy rate needs ~25 KB (latency x bandwidth), and 30 FMNMX plus ~8
integer instructions on the half-rate ALU pipe were already ~19 of the 16 clocks. Here a thread
keeps five loads in flight (2048 threads: ~40 KB per SM) and a sample costs 12.5 FMNMX, 3 shared
loads, ~4 other shared accesses and ~6 for addresses, guards and the loop: ~26 issue slots of the 64,
~9 ALU clocks of the 16. Measured: 275 us, 92 % of the copy rate (331 us, 76 %, with 4 blocks per SM).
`make inspect DAY=12` shows the naive kernel's stack frame and the optimized kernel's none.

What you write (each raises NotImplementedError with its hint until you do):
  median_sort_kernel     load the clamped window into a local array, insertion-sort it, write w[RADIUS] (16 lines)
  _middle4_of6           five layers of compare-exchanges; in the fourth, keep only max(a0, a1) and min(a4, a5) (13
                         lines)
  _middle2_of8           sort p, q; each rank is the min of three splits (two of them a max of a c and a p) (5
                         lines)
  _median4               _middle4_of6 on the shared six, _middle2_of8 for each pair, then max(r3, min(new, r4)) per
                         window (5 lines)
  median_sliding_kernel  stage the span, barrier, prefetch the next tile, _median4 of 12 reads, stage results,
                         barrier, store (38 lines)
Everything else in this file is given. Grade with:  make check DAY=12
"""

import numpy as np

from course import cuda, launch  # first: course picks GPU or simulator before numba loads
from numba import float32, int64, uint64

TITLE = "Local memory and spills"
MEMORY_SPACE = "local"
VERSIONS = ("naive", "optimized")
RADIUS = 4
WIDTH = 2 * RADIUS + 1
TEST_SIZES = (1, 5, 255, 257, 1021, 2053)  # shorter than the window, a block -1 and +1, primes
BENCH_SIZES = (1 << 27,)  # 537 MB in, 537 MB out: ~18x the 60 MB L2
BOUND = "memory"
THREADS = 256  # naive's block; also the sliding kernel's (a multiple of 32: the bank arithmetic)
ITEMS = 4  # outputs per thread in the sliding kernel: _median4 is written for four
BLOCKS_PER_SM = 8  # the sliding kernel's grid: 8 x 256 threads (30 registers each) fill an SM
TILE = ITEMS * THREADS  # outputs per block per step
SPAN = TILE + 2 * RADIUS  # inputs per step: the tile and its halo
PHASE_SLOTS = THREADS + 2 * RADIUS  # one row of the phase-split shared layout: = 8 (mod 32)
BUFFER_SLOTS = ITEMS * PHASE_SLOTS  # one shared buffer, flat


def make_inputs(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n, dtype=np.float32)
    # Spikes every so often: what a median filter is for, and a check that it removes them.
    spikes = rng.random(n) < 0.05
    x[spikes] += np.float32(50.0)
    return (x,)


def reference(x):
    """Each window's middle value (WIDTH is odd: the median is an element, exactly). A chunk of windows
    at a time: np.partition copies the (n, WIDTH) view it sorts, and at the benchmark's 2^27 a whole
    copy is 4.8 GB (np.median over all of it took ~27 s); a chunk's copy stays in cache. For finite x:
    np.partition sorts a NaN last, where np.median would return it."""
    padded = np.pad(x, RADIUS, mode="edge")
    windows = np.lib.stride_tricks.sliding_window_view(padded, WIDTH)  # (n, WIDTH)
    out = np.empty(x.size, dtype=np.float32)
    for lo in range(0, x.size, 1 << 18):
        out[lo:lo + (1 << 18)] = np.partition(windows[lo:lo + (1 << 18)], RADIUS, axis=1)[:, RADIUS]
    return out


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
def _cx(a, b):
    """A compare-exchange: (min, max), two FMNMX instructions, no branch."""
    return min(a, b), max(a, b)


@cuda.jit(device=True, inline=True)
def _middle4_of6(a0, a1, a2, a3, a4, a5):
    """Ranks 1..4 (0-based) of six named values: the 12-exchange sorting network for six, with the
    two exchanges whose other output is the unused minimum or maximum cut to one min/max: 22 in all."""
    raise NotImplementedError("Day 12: five layers of compare-exchanges; in the fourth, keep only max(a0, a1) and "
                              "min(a4, a5) (13 lines)")


@cuda.jit(device=True, inline=True)
def _middle2_of8(c1, c2, c3, c4, p, q):
    """Ranks 3 and 4 of eight values: six whose ranks 1..4 are c1 <= c2 <= c3 <= c4, plus p and q.

    The k-th smallest of two sorted lists a, b is min over i of max(a_i, b_(k-i)): take i from a
    and k - i from b, the largest of them bounds the k-th from above, and the best split meets it.
    With b = (min(p, q), max(p, q)) only three splits exist for each rank: 10 min/max."""
    raise NotImplementedError("Day 12: sort p, q; each rank is the min of three splits (two of them a max of a c and a "
                              "p) (5 lines)")


@cuda.jit(device=True, inline=True)
def _median4(v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11):
    """The medians of the four windows v0..v8, v1..v9, v2..v10, v3..v11 of twelve named values.

    Neighbouring windows share most of their values, so share the work: v3..v8 lie in all four
    windows (ranks 1..4 of them, 22 min/max); v1..v8 in the first two and v3..v10 in the last two
    (ranks 3 and 4 of each eight, 10 min/max each); each window then adds one value, and the median
    of nine is the middle of (rank 3, the new value, rank 4): 2 min/max. 50 min/max for four medians,
    12.5 a sample instead of 30."""
    raise NotImplementedError("Day 12: _middle4_of6 on the shared six, _middle2_of8 for each pair, then max(r3, "
                              "min(new, r4)) per window (5 lines)")


@cuda.jit(device=True, inline=True)
def _load_span(x, tile0, t):
    """Thread t's ITEMS + 1 loads of the span x[tile0 - RADIUS .. tile0 + TILE + RADIUS - 1]: span
    element e = m * THREADS + t for m < ITEMS, and the halo element ITEMS * THREADS + t for t < 2R.
    A warp loads 32 neighbouring values per instruction (coalesced), and every load is issued before
    any is used: ITEMS + 1 loads in flight per thread."""
    n = x.size
    first = tile0 - RADIUS
    h = float32(0)
    if first >= 0 and first + SPAN <= n:
        # Inside the array (every tile but the first and the last): no clamp, and an unsigned base so
        # the five addresses are one register plus constants, with no wrap-around check.
        base = uint64(first + t)
        g0 = x[base]
        g1 = x[base + uint64(THREADS)]
        g2 = x[base + uint64(2 * THREADS)]
        g3 = x[base + uint64(3 * THREADS)]
        if t < 2 * RADIUS:
            h = x[base + uint64(4 * THREADS)]
    else:
        # The first or last tile: clamp into [0, n - 1], which is the filter's edge rule (the end
        # values repeat), and keeps the loads of a ragged last tile inside the array.
        last = n - 1
        g0 = x[uint64(min(max(first + t, 0), last))]
        g1 = x[uint64(min(max(first + THREADS + t, 0), last))]
        g2 = x[uint64(min(max(first + 2 * THREADS + t, 0), last))]
        g3 = x[uint64(min(max(first + 3 * THREADS + t, 0), last))]
        if t < 2 * RADIUS:
            h = x[uint64(min(max(first + 4 * THREADS + t, 0), last))]
    return g0, g1, g2, g3, h


@cuda.jit
def median_sliding_kernel(x, out):
    """Four neighbouring medians per thread from twelve named values, spans staged in shared memory.

    Block b walks tiles b, b + gridDim, ... of TILE = ITEMS * THREADS outputs (grid-stride over
    tiles). Per tile: the span's loads (prefetched during the previous tile, _load_span) go to
    `inp` in the phase-split layout slot(e) = (e % 4) * PHASE_SLOTS + e // 4; barrier; the next
    tile's loads are issued; thread t reads span elements 4t .. 4t + 11 (slot t + a constant),
    _median4 gives outputs 4t .. 4t + 3, written to `res` at slot d * PHASE_SLOTS + t; barrier; thread
    t stores outputs m * THREADS + t from `res` (coalesced), guarded by n. Every value has a name:
    stack frame 0.
    """
    raise NotImplementedError("Day 12: stage the span, barrier, prefetch the next tile, _median4 of 12 reads, stage "
                              "results, barrier, store (38 lines)")


_SIG = "void(float32[::1], float32[::1])"
KERNELS = {"naive": (median_sort_kernel, _SIG), "optimized": (median_sliding_kernel, _SIG)}


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
    grid = launch.grid_stride_blocks(-(-x.size // ITEMS), THREADS, BLOCKS_PER_SM)  # one block per tile at most
    median_sliding_kernel[grid, THREADS](d_x, out)
    return launch.result(out, x)


def library(x):
    """The same filter through CuPy's SciPy-compatible ndimage (a row of the benchmark table)."""
    import cupy
    import cupyx.scipy.ndimage as ndi

    return ndi.median_filter(cupy.asarray(x), size=WIDTH, mode="nearest")
