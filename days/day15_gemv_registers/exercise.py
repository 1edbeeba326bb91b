"""Day 15 exercise: register-tiled GEMV -- y = A x, A (rows, cols) float32, row-major.

v1 naive      one thread per row walks its row: at each step the 32 lanes of a warp read 32 different
              rows (32 separate memory transactions per load), and only `rows` threads exist to hide
              the latency.
v2 optimized  a warp per four rows: the lanes stride along the rows together (each load is one
              coalesced 128-byte transaction per row), each x[k] is loaded once into a register and
              used for all four rows, and the four partial sums meet through warp shuffles
              (shfl_down_sync): no shared memory, no barrier.

Napkin math: A is read once (4 bytes per multiply-add); x and y are noise next to it. 2 FLOPs per
4 bytes: memory-bound. At the H200's ~4.1 TB/s, A of 32768 x 4096 (512 MB) takes ~0.13 ms.

What you write (each raises NotImplementedError with its hint until you do):
  gemv_row_per_thread_kernel  r = cuda.grid(1); guard r < a.shape[0]; loop over k accumulating a[r, k] * x[k]; store
                              y[r] (6 lines)
  gemv_warp_rows_kernel       grid-stride over row groups; 4 accumulators over k = lane, lane + 32, ...; shuffle-
                              reduce; lane 0 stores (37 lines)
Everything else in this file is given. Grade with:  make check DAY=15
"""

import numpy as np

from course import cuda, launch
from numba import float32

TITLE = "Register-tiled GEMV"
MEMORY_SPACE = "register"
VERSIONS = ("naive", "optimized")
# (rows, cols): one row; fewer columns than a warp; rows not a multiple of four; a warp +1; primes.
TEST_SIZES = ((1, 1), (5, 31), (33, 33), (37, 257), (131, 100))
BENCH_SIZES = ((32768, 4096),)  # A is 512 MB: ~9x the L2
BOUND = "memory"
THREADS = 256
WARP = 32
ROWS_PER_WARP = 4
FULL_MASK = 0xFFFFFFFF


def make_inputs(n, seed: int = 0):
    rows, cols = n
    rng = np.random.default_rng(seed)
    # Positive means keep the sums well away from zero: a float32 dot product of thousands of
    # zero-mean terms cancels, and its rounding error would swamp any tolerance.
    a = rng.standard_normal((rows, cols), dtype=np.float32) + np.float32(0.5)
    x = rng.uniform(0.5, 1.5, cols).astype(np.float32)
    return a, x


def reference(a, x):
    return (a.astype(np.float64) @ x.astype(np.float64)).astype(np.float32)


def traffic(a, x):
    """(minimum bytes moved through device memory, FLOPs)."""
    rows, cols = a.shape
    return (a.size + cols + rows) * 4, 2 * rows * cols


@cuda.jit
def gemv_row_per_thread_kernel(a, x, y):  # a (rows, cols), x (cols,), y (rows,)
    """One thread per row: thread r = cuda.grid(1) computes y[r] = sum_k a[r, k] * x[k].

    The grid has ceil(rows / 256) blocks; threads with r >= rows do nothing. Accumulate in float32.
    """
    raise NotImplementedError("Day 15: r = cuda.grid(1); guard r < a.shape[0]; loop over k accumulating a[r, k] * "
                              "x[k]; store y[r] (6 lines)")


@cuda.jit
def gemv_warp_rows_kernel(a, x, y):  # a (rows, cols), x (cols,), y (rows,)
    """A warp per ROWS_PER_WARP (4) consecutive rows, in a grid-stride loop over row groups.

    lane = threadIdx.x % WARP; the warp's first row r0 = (cuda.grid(1) // WARP) * 4, stepping by
    (cuda.gridsize(1) // WARP) * 4. For each group: lanes start at k = lane and step by WARP, so a
    warp reads 32 consecutive floats of a row at once; load x[k] once and use it for all four rows
    (four accumulators). Rows past the end: clamp with min(r, rows - 1) and do not store them.
    Then combine the lanes with cuda.shfl_down_sync(FULL_MASK, acc, offset) for offset 16, 8, 4, 2, 1
    (every lane must take part: keep the loop trip count the same for the whole warp) and let
    lane 0 store y. No shared memory, no local arrays.
    """
    raise NotImplementedError("Day 15: grid-stride over row groups; 4 accumulators over k = lane, lane + 32, ...; "
                              "shuffle-reduce; lane 0 stores (37 lines)")


_SIG = "void(float32[:, ::1], float32[::1], float32[::1])"
KERNELS = {"naive": (gemv_row_per_thread_kernel, _SIG), "optimized": (gemv_warp_rows_kernel, _SIG)}


def _check(a, x):
    launch.check_array("a", a, dtype=np.float32, ndim=2)
    launch.check_array("x", x, dtype=np.float32, shape=(a.shape[1],))
    if a.shape[0] == 0 or a.shape[1] == 0:
        raise ValueError(f"a: expected at least one row and one column, got shape {tuple(a.shape)}")


def naive(a, x):
    _check(a, x)
    d_a, d_x = launch.to_device(a, x)
    y = launch.empty((a.shape[0],), np.float32)
    gemv_row_per_thread_kernel[launch.blocks(a.shape[0], THREADS), THREADS](d_a, d_x, y)
    return launch.result(y, a, x)


def optimized(a, x):
    _check(a, x)
    d_a, d_x = launch.to_device(a, x)
    y = launch.empty((a.shape[0],), np.float32)
    warps = -(-a.shape[0] // ROWS_PER_WARP)
    blocks = launch.grid_stride_blocks(warps * WARP, THREADS)
    gemv_warp_rows_kernel[blocks, THREADS](d_a, d_x, y)
    return launch.result(y, a, x)


def library(a, x):
    """cuBLAS GEMV through CuPy (a row of the benchmark table)."""
    import cupy

    return cupy.matmul(cupy.asarray(a), cupy.asarray(x))
