"""Day 18: checkpoint, row L2 normalisation -- y[r, :] = x[r, :] / max(||x[r, :]||_2, 1e-12).

The unit in one kernel: coalesced loads (days 13-15), sums in registers with independent
accumulators (days 11-14), warp shuffles (day 17), one path per warp (day 16).

v1 naive      two kernels: a thread per row sums its squares (neighbouring lanes a row apart:
              uncoalesced), writes 1/norm to a scratch array; then a block per row scales it.
              x is read twice from DRAM and the scratch array makes a round trip.
v2 optimized  one kernel, a warp per row: the lanes load the row together (coalesced), each lane
              keeping its 32 values in registers with all 32 loads in flight; they fold their sums
              of squares with a shfl_xor butterfly so every lane holds the norm, then scale the
              registers and store. DRAM sees x once and y once. Rows longer than 1024 floats do not
              fit: they are swept twice, the second sweep re-reading from L1/L2.

Napkin math: 8 bytes per element (read x, write y), 3 FLOPs: memory-bound. 131072 x 1024 floats is
512 MB each way: ~0.26 ms at the H200's ~4.1 TB/s copy rate. v1 moves at least 12 bytes per element
(x twice, y once) and its first kernel reads uncoalesced.
"""

import math

import numpy as np

from course import cuda, launch
from numba import float32, uint64

TITLE = "Checkpoint: fused row L2 normalisation"
MEMORY_SPACE = "register"
VERSIONS = ("naive", "optimized")
# (rows, cols): one element; fewer columns than a warp; a warp +1; a prime; long rows; many rows.
TEST_SIZES = ((1, 1), (3, 31), (7, 33), (5, 257), (2, 1031), (67, 40))
BENCH_SIZES = ((131072, 1024),)  # 512 MB in, 512 MB out
BOUND = "memory"
THREADS = 256
WARP = 32
FULL_MASK = 0xFFFFFFFF
# 6 blocks of 256 threads fit on an SM at up to 42 registers a thread: the whole grid is resident at
# once, so no second wave of blocks arrives late to stride over the same rows (measured best on an H200).
BLOCKS_PER_SM = 6
# The fused kernel keeps a row of up to 1024 floats in registers: 32 values a lane, 64 registers a
# thread, so four blocks of 256 threads fill an SM's 64K registers, each lane with 32 loads in flight.
ROW_VALUES = 32
ROW_IN_REGISTERS = ROW_VALUES * WARP
FUSED_BLOCKS_PER_SM = 4
EPS = np.float32(1e-12)  # as torch.nn.functional.normalize: a zero row stays zero


def make_inputs(n, seed: int = 0):
    rows, cols = n
    rng = np.random.default_rng(seed)
    # Rows of very different scales, so a norm taken from the wrong row shows.
    scale = np.exp2(rng.integers(-4, 5, size=(rows, 1))).astype(np.float32)
    return (rng.standard_normal((rows, cols), dtype=np.float32) * scale,)


def reference(x):
    v = x.astype(np.float64)
    norm = np.sqrt((v * v).sum(axis=1, keepdims=True))
    return (v / np.maximum(norm, float(EPS))).astype(np.float32)


def traffic(x):
    """(minimum bytes moved through device memory, FLOPs): x read once, y written once."""
    return 2 * x.size * 4, 3 * x.size


@cuda.jit
def row_inv_norm_kernel(x, inv_norm):  # x (rows, cols), inv_norm (rows,)
    """Thread r = cuda.grid(1) (guard r < rows) sums x[r, k]**2 over its row in float32 and stores
    inv_norm[r] = 1 / max(math.sqrt(ss), EPS)."""
    # EXERCISE: a thread per row: sum of squares, then 1 / max(sqrt, EPS)
    r = cuda.grid(1)
    if r < x.shape[0]:
        ss = float32(0.0)
        for k in range(x.shape[1]):
            # Lanes a whole row apart: every load instruction touches 32 different rows.
            v = x[r, k]
            ss += v * v
        inv_norm[r] = float32(1.0) / max(math.sqrt(ss), EPS)


@cuda.jit
def scale_rows_kernel(x, inv_norm, y):  # x, y (rows, cols), inv_norm (rows,)
    """A block per row, striding over rows (r = blockIdx.x, += gridDim.x); the block's threads sweep
    the row (k = threadIdx.x, += blockDim.x) writing y[r, k] = x[r, k] * inv_norm[r]."""
    # EXERCISE: block-stride over rows, thread-stride over columns
    r = cuda.blockIdx.x
    while r < x.shape[0]:  # a block per row, striding over rows; the threads sweep the row: coalesced
        s = inv_norm[r]
        k = cuda.threadIdx.x
        while k < x.shape[1]:
            y[r, k] = x[r, k] * s
            k += cuda.blockDim.x
        r += cuda.gridDim.x


@cuda.jit(device=True, inline=True)
def warp_allsum(v):
    """Sum of v over the 32 lanes of the warp, in every lane: a butterfly with
    cuda.shfl_xor_sync(FULL_MASK, v, offset) for offsets 16, 8, 4, 2, 1 (no broadcast step)."""
    # EXERCISE: the shfl_xor_sync butterfly, offsets 16 down to 1
    offset = WARP // 2
    while offset > 0:
        v += cuda.shfl_xor_sync(FULL_MASK, v, offset)
        offset //= 2
    return v


@cuda.jit
def l2norm_warp_kernel(x, y):  # x, y (rows, cols)
    """One fused kernel, a warp per row: r = cuda.grid(1) // WARP, stepping by cuda.gridsize(1) // WARP.

    Rows of up to ROW_IN_REGISTERS floats (cols is the same for the whole grid: a uniform branch):
    1. Keep the row in v = cuda.local.array(ROW_VALUES, float32). Every loop over v has the constant
       trip count ROW_VALUES, so it unrolls and v lives in registers. Take the row as a 1-D view
       (xr = x[r]) and index it unsigned, k = uint64(lane) + uint64(j * WARP), compared with
       uint64(cols): the loads share one address and uint64 < int64 would compare as float64.
       Load v[j] = xr[k] (0 past the row), then sum the squares with two accumulators.
    2. Fold the sum across the warp with warp_allsum: every lane ends with the total.
    3. inv = 1 / max(math.sqrt(ss), EPS); store y[r, k] = v[j] * inv where k < cols.
    Longer rows: sweep once summing squares (four loads in flight, two accumulators), fold, then
    sweep again writing y = x * inv (the re-read mostly hits L1/L2). No shared memory.
    """
    # EXERCISE: warp per row; the row in registers; warp_allsum; scale and store; two sweeps for long rows
    rows, cols = x.shape
    lane = cuda.threadIdx.x % WARP
    r = cuda.grid(1) // WARP
    # Every lane of a warp has the same r, and cols is the same for the whole grid, so loop trips and
    # branches are warp-uniform and all 32 lanes arrive at each shuffle.
    if cols <= ROW_IN_REGISTERS:
        # The row stays in registers: each lane loads its ROW_VALUES values once, all in flight
        # together, and scales them after the norm is known. The loops have a constant trip count, so
        # they unroll, every index into `v` is a constant, and the array lives in registers (day 12).
        v = cuda.local.array(ROW_VALUES, float32)
        ulane = uint64(lane)  # unsigned: no negative-index check, and j * WARP folds into the load
        ucols = uint64(cols)  # compared with an unsigned index (an int64 would make both float64)
        while r < rows:
            xr = x[r]  # the row as a 1-D view: one base address for all 32 loads
            yr = y[r]
            for j in range(ROW_VALUES):
                k = ulane + uint64(j * WARP)
                v[j] = xr[k] if k < ucols else float32(0.0)
            ss0 = float32(0.0)
            ss1 = float32(0.0)
            for j in range(0, ROW_VALUES, 2):  # two accumulators: two FMA chains of 16
                ss0 += v[j] * v[j]
                ss1 += v[j + 1] * v[j + 1]
            inv = float32(1.0) / max(math.sqrt(warp_allsum(ss0 + ss1)), EPS)
            for j in range(ROW_VALUES):
                k = ulane + uint64(j * WARP)
                if k < ucols:
                    yr[k] = v[j] * inv
            r += cuda.gridsize(1) // WARP
        return
    # Longer rows do not fit: sum the squares in one sweep, then sweep again to scale. The second
    # sweep re-reads a row this warp touched microseconds earlier, mostly from L1/L2.
    while r < rows:
        ss0 = float32(0.0)
        ss1 = float32(0.0)
        k = lane
        while k + 3 * WARP < cols:
            # Four independent 128-byte loads per warp in flight; two accumulators break the FMA chain.
            v0, v1 = x[r, k], x[r, k + WARP]
            v2, v3 = x[r, k + 2 * WARP], x[r, k + 3 * WARP]
            ss0 += v0 * v0 + v1 * v1
            ss1 += v2 * v2 + v3 * v3
            k += 4 * WARP
        while k < cols:
            v0 = x[r, k]
            ss0 += v0 * v0
            k += WARP
        inv = float32(1.0) / max(math.sqrt(warp_allsum(ss0 + ss1)), EPS)
        k = lane
        while k + 3 * WARP < cols:
            v0, v1 = x[r, k], x[r, k + WARP]
            v2, v3 = x[r, k + 2 * WARP], x[r, k + 3 * WARP]
            y[r, k] = v0 * inv
            y[r, k + WARP] = v1 * inv
            y[r, k + 2 * WARP] = v2 * inv
            y[r, k + 3 * WARP] = v3 * inv
            k += 4 * WARP
        while k < cols:
            y[r, k] = x[r, k] * inv
            k += WARP
        r += cuda.gridsize(1) // WARP


_SIG_NORM = "void(float32[:, ::1], float32[::1])"
_SIG_SCALE = "void(float32[:, ::1], float32[::1], float32[:, ::1])"
_SIG_FUSED = "void(float32[:, ::1], float32[:, ::1])"
KERNELS = {
    "naive": (row_inv_norm_kernel, _SIG_NORM),
    "naive.scale": (scale_rows_kernel, _SIG_SCALE),
    "optimized": (l2norm_warp_kernel, _SIG_FUSED),
}


def _check(x):
    launch.check_array("x", x, dtype=np.float32, ndim=2)
    if x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"x: expected at least one row and one column, got shape {tuple(x.shape)}")


def naive(x):
    _check(x)
    (d_x,) = launch.to_device(x)
    inv_norm = launch.empty((x.shape[0],), np.float32)
    y = launch.empty(x.shape, np.float32)
    row_inv_norm_kernel[launch.blocks(x.shape[0], THREADS), THREADS](d_x, inv_norm)
    scale_blocks = launch.grid_stride_blocks(x.shape[0] * THREADS, THREADS, BLOCKS_PER_SM)
    scale_rows_kernel[scale_blocks, THREADS](d_x, inv_norm, y)
    return launch.result(y, x)


def optimized(x):
    _check(x)
    (d_x,) = launch.to_device(x)
    y = launch.empty(x.shape, np.float32)
    fused_blocks = launch.grid_stride_blocks(x.shape[0] * WARP, THREADS, FUSED_BLOCKS_PER_SM)
    l2norm_warp_kernel[fused_blocks, THREADS](d_x, y)
    return launch.result(y, x)


def library(x):
    """The same job as CuPy expressions: a norm reduction, then a broadcast divide (two kernels)."""
    import cupy

    v = cupy.asarray(x)
    norm = cupy.sqrt(cupy.sum(v * v, axis=1, keepdims=True))
    return v / cupy.maximum(norm, EPS)
