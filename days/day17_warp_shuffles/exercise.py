"""Day 17 exercise: warp shuffles -- row sums, out[r] = sum_k x[r, k], one block of 256 threads per row.

The load phase (row_partial) and the host functions are given. Write the two block reductions:
first a tree in shared memory, then warp shuffles.
Grade with:  make check DAY=17
"""

import numpy as np

from course import cuda, launch
from numba import float32, uint64

TITLE = "Warp shuffles"
MEMORY_SPACE = "register"
VERSIONS = ("naive", "optimized")
THREADS = 256
WARP = 32
WARPS = THREADS // WARP
FULL_MASK = 0xFFFFFFFF
# 6 blocks of 256 threads fit on an SM at up to 42 registers a thread: the whole grid is resident at
# once, so no second wave of blocks arrives late to stride over the same rows (measured best on an H200).
BLOCKS_PER_SM = 6


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
    raise NotImplementedError("Day 17: cuda.shared.array(THREADS, float32); store the partial; halve with "
                              "a barrier after each step; thread 0 stores (14 lines)")


@cuda.jit(device=True)
def warp_sum(v):
    """Sum of v over the 32 lanes of the warp; lane 0 must end with the total (other lanes: anything).
    Use cuda.shfl_down_sync(FULL_MASK, v, offset) for offset 16, 8, 4, 2, 1."""
    raise NotImplementedError("Day 17: offset = 16; while offset > 0: v += cuda.shfl_down_sync(FULL_MASK, v, "
                              "offset); offset //= 2 (5 lines)")


@cuda.jit
def sum_rows_shuffle_kernel(x, out):  # x (rows, cols), out (rows,)
    """Same rows and partials as above, reduced with warp_sum: lane 0 of each warp stores its warp's
    sum in a small shared array, one cuda.syncthreads(), then warp 0 reads those WARPS values (0 for
    lanes >= WARPS), folds them with warp_sum, and lane 0 writes out[r].

    Careful with the next row: a fast warp must not overwrite a slot warp 0 has not read yet. Either
    a second barrier, or two sets of slots used on alternate rows, shape (2, WARPS).
    """
    raise NotImplementedError("Day 17: warp_sum the partial; lane 0 -> shared slot; one barrier; warp 0 "
                              "folds the slots (18 lines)")


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
