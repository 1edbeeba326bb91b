"""Day 18 exercise (checkpoint): row L2 normalisation -- y[r, :] = x[r, :] / max(||x[r, :]||_2, EPS).

The host functions are given. Write three kernels: the naive pair (a thread per row for the norm,
then a scaling kernel) and the fused warp-per-row kernel that uses everything of this unit.
Grade with:  make check DAY=18
"""

import math  # noqa: F401  (math.sqrt in your kernels)

import numpy as np

from course import cuda, launch
from numba import float32, uint64  # noqa: F401  (for your accumulators and unsigned offsets)

TITLE = "Checkpoint: fused row L2 normalisation"
MEMORY_SPACE = "register"
VERSIONS = ("naive", "optimized")
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


@cuda.jit
def row_inv_norm_kernel(x, inv_norm):  # x (rows, cols), inv_norm (rows,)
    """Thread r = cuda.grid(1) (guard r < rows) sums x[r, k]**2 over its row in float32 and stores
    inv_norm[r] = 1 / max(math.sqrt(ss), EPS)."""
    raise NotImplementedError("Day 18: a thread per row: sum of squares, then 1 / max(sqrt, EPS) (7 lines)")


@cuda.jit
def scale_rows_kernel(x, inv_norm, y):  # x, y (rows, cols), inv_norm (rows,)
    """A block per row, striding over rows (r = blockIdx.x, += gridDim.x); the block's threads sweep
    the row (k = threadIdx.x, += blockDim.x) writing y[r, k] = x[r, k] * inv_norm[r]."""
    raise NotImplementedError("Day 18: block-stride over rows, thread-stride over columns (8 lines)")


@cuda.jit
def l2norm_warp_kernel(x, y):  # x, y (rows, cols)
    """One fused kernel, a warp per row: r = cuda.grid(1) // WARP, stepping by cuda.gridsize(1) // WARP.

    Rows of up to ROW_IN_REGISTERS floats (cols is the same for the whole grid: a uniform branch):
    1. Keep the row in v = cuda.local.array(ROW_VALUES, float32). Every loop over v has the constant
       trip count ROW_VALUES, so it unrolls and v lives in registers. Take the row as a 1-D view
       (xr = x[r]) and index it unsigned, k = uint64(lane) + uint64(j * WARP), compared with
       uint64(cols): the loads share one address and uint64 < int64 would compare as float64.
       Load v[j] = xr[k] (0 past the row), then sum the squares with two accumulators.
    2. Fold the sum across the warp with cuda.shfl_xor_sync(FULL_MASK, ss, offset), offsets 16..1:
       every lane ends with the total, so no broadcast is needed.
    3. inv = 1 / max(math.sqrt(ss), EPS); store y[r, k] = v[j] * inv where k < cols.
    Longer rows: sweep once summing squares (four loads in flight, two accumulators), fold, then
    sweep again writing y = x * inv (the re-read mostly hits L1/L2). No shared memory.
    """
    raise NotImplementedError("Day 18: warp per row; the row in registers; shfl_xor butterfly; scale "
                              "and store; two sweeps for long rows (55 lines)")


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
