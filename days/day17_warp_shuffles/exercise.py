"""Day 17 exercise: warp shuffles -- row sums, out[r] = sum_k x[r, k], one block of 256 threads per row.

Both versions share the load phase (each thread sums a strided slice of the row, eight loads in
flight); they differ only in how the block's 256 partial sums become one.

v1 naive      a tree in shared memory: 256 -> 128 -> ... -> 1, a barrier after every halving
              (nine barriers a row with the one after the stores, and a shared-memory store and load
              per step).
v2 optimized  warp shuffles: each warp folds its 32 partials in registers with shfl_down_sync
              (five steps, no barrier), lane 0 of each warp writes one value to shared memory, and
              after a single barrier warp 0 folds those eight the same way.

Napkin math: 4 bytes read per element, one add; the output is one float per row. Memory-bound:
at the H200's ~4.1 TB/s, 65536 x 2048 floats (512 MB) take ~0.13 ms. A row is only 8 KB, so the
reduction at its end is a large share of each block's time: that is where v2 wins.

What you write (each raises NotImplementedError with its hint until you do):
  sum_rows_shared_kernel   a shared array of THREADS floats; store the partial; halve, a barrier after each step;
                           thread 0 stores (15 lines)
  warp_sum                 offset = 16; while offset > 0: v += cuda.shfl_down_sync(FULL_MASK, v, offset); offset //=
                           2 (5 lines)
  sum_rows_shuffle_kernel  warp_sum the partial; lane 0 -> shared slot; one barrier; warp 0 folds the slots (18
                           lines)
Everything else in this file is given. Grade with:  make check DAY=17
"""

import numpy as np

from course import cuda, launch
from numba import float32, uint64

TITLE = "Warp shuffles"
MEMORY_SPACE = "register"
VERSIONS = ("naive", "optimized")
# (rows, cols): one element; fewer columns than threads; a block +1; a prime; several trips a thread.
TEST_SIZES = ((1, 1), (3, 255), (2, 257), (4, 1031), (5, 4099))
BENCH_SIZES = ((65536, 2048),)  # 512 MB: ~9x the L2
BOUND = "memory"
THREADS = 256
WARP = 32
WARPS = THREADS // WARP
FULL_MASK = 0xFFFFFFFF
# 6 blocks of 256 threads fit on an SM at up to 42 registers a thread: the whole grid is resident at
# once, so no second wave of blocks arrives late to stride over the same rows (measured best on an H200).
BLOCKS_PER_SM = 6


def make_inputs(n, seed: int = 0):
    rows, cols = n
    rng = np.random.default_rng(seed)
    # Mean 1: row sums stay well away from zero, so float32 rounding cannot dominate the tolerance.
    return (rng.standard_normal((rows, cols), dtype=np.float32) + np.float32(1.0),)


def reference(x):
    return x.astype(np.float64).sum(axis=1).astype(np.float32)


def traffic(x):
    """(minimum bytes moved through device memory, FLOPs)."""
    return (x.size + x.shape[0]) * 4, x.size


@cuda.jit(device=True)
def row_partial(x, r, t):
    """Thread t's share of row r: elements t, t + 256, t + 512, ..., eight loads in flight a trip (a
    2048-float row is one trip). At each step the block reads 256 consecutive floats: 8 coalesced
    128-byte transactions. The row is a 1-D view and the index unsigned, so the eight loads share one
    address and their offsets (0, 1 KB, ..., 7 KB) fold into the instructions."""
    xr = x[r]
    cols = uint64(xr.size)
    acc = float32(0.0)
    k = uint64(t)
    while k + uint64(7 * THREADS) < cols:
        v0, v1 = xr[k], xr[k + uint64(THREADS)]
        v2, v3 = xr[k + uint64(2 * THREADS)], xr[k + uint64(3 * THREADS)]
        v4, v5 = xr[k + uint64(4 * THREADS)], xr[k + uint64(5 * THREADS)]
        v6, v7 = xr[k + uint64(6 * THREADS)], xr[k + uint64(7 * THREADS)]
        acc += ((v0 + v1) + (v2 + v3)) + ((v4 + v5) + (v6 + v7))
        k += uint64(8 * THREADS)
    while k < cols:
        acc += xr[k]
        k += uint64(THREADS)
    return acc


@cuda.jit
def sum_rows_shared_kernel(x, out):  # x (rows, cols), out (rows,)
    """Block-stride over rows (r = blockIdx.x, then += gridDim.x). For each row: every thread stores
    row_partial(x, r, t) into a shared array of THREADS floats, then halve: for s = 128, 64, ..., 1,
    threads t < s add partial[t + s] into partial[t], with cuda.syncthreads() after every step
    (and once before the first). Thread 0 writes out[r]. Every thread must reach every barrier.
    """
    raise NotImplementedError("Day 17: a shared array of THREADS floats; store the partial; halve, a barrier after "
                              "each step; thread 0 stores (15 lines)")


@cuda.jit(device=True)
def warp_sum(v):
    """Sum of v over the 32 lanes of the warp; lane 0 must end with the total (other lanes: anything).
    Use cuda.shfl_down_sync(FULL_MASK, v, offset) for offset 16, 8, 4, 2, 1. Registers only: each step
    reads the value of the lane `offset` above, so the tree halves without touching shared memory."""
    raise NotImplementedError("Day 17: offset = 16; while offset > 0: v += cuda.shfl_down_sync(FULL_MASK, v, offset); "
                              "offset //= 2 (5 lines)")


@cuda.jit
def sum_rows_shuffle_kernel(x, out):  # x (rows, cols), out (rows,)
    """Same rows and partials as above, reduced with warp_sum: lane 0 of each warp stores its warp's
    sum in a small shared array, one cuda.syncthreads(), then warp 0 reads those WARPS values (0 for
    lanes >= WARPS), folds them with warp_sum, and lane 0 writes out[r].

    Careful with the next row: a fast warp must not overwrite a slot warp 0 has not read yet. Either
    a second barrier, or two sets of slots used on alternate rows, shape (2, WARPS).
    """
    raise NotImplementedError("Day 17: warp_sum the partial; lane 0 -> shared slot; one barrier; warp 0 folds the "
                              "slots (18 lines)")


_SIG = "void(float32[:, ::1], float32[::1])"
KERNELS = {"naive": (sum_rows_shared_kernel, _SIG), "optimized": (sum_rows_shuffle_kernel, _SIG)}


def _check(x):
    launch.check_array("x", x, dtype=np.float32, ndim=2)
    if x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"x: expected at least one row and one column, got shape {tuple(x.shape)}")


def _launch(kernel, x):
    _check(x)
    (d_x,) = launch.to_device(x)
    out = launch.empty((x.shape[0],), np.float32)
    # A block per row, as many blocks as the GPU holds at once; each block strides over the rows.
    blocks = launch.grid_stride_blocks(x.shape[0] * THREADS, THREADS, BLOCKS_PER_SM)
    kernel[blocks, THREADS](d_x, out)
    return launch.result(out, x)


def naive(x):
    return _launch(sum_rows_shared_kernel, x)


def optimized(x):
    return _launch(sum_rows_shuffle_kernel, x)


def library(x):
    """CuPy's row sum (a row of the benchmark table)."""
    import cupy

    return cupy.sum(cupy.asarray(x), axis=1)
