"""Day 18 exercise (checkpoint): row L2 normalisation -- y[r, :] = x[r, :] / max(||x[r, :]||_2, EPS).

The host functions are given. Write three kernels: the naive pair (a thread per row for the norm,
then a scaling kernel) and the fused warp-per-row kernel that uses everything of this unit.
Grade with:  make check DAY=18
"""

import math  # noqa: F401  (math.sqrt in your kernels)

import numpy as np

from course import cuda, launch
from numba import float32  # noqa: F401  (for your accumulators)

TITLE = "Checkpoint: fused row L2 normalisation"
MEMORY_SPACE = "register"
VERSIONS = ("naive", "optimized")
THREADS = 256
WARP = 32
FULL_MASK = 0xFFFFFFFF
# 6 blocks of 256 threads fit on an SM at up to 42 registers a thread: the whole grid is resident at
# once, so no second wave of blocks arrives late to stride over the same rows (measured best on an H200).
BLOCKS_PER_SM = 6
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

    1. Lanes sweep the row together (k = lane, += WARP) summing squares in registers; unroll four
       trips with two accumulators so several loads are in flight, then finish the tail.
    2. Fold the sum across the warp with cuda.shfl_xor_sync(FULL_MASK, ss, offset), offsets 16..1:
       every lane ends with the total, so no broadcast is needed.
    3. inv = 1 / max(math.sqrt(ss), EPS); sweep the row again writing y = x * inv (the re-read hits
       L1/L2). No local arrays, no shared memory.
    """
    raise NotImplementedError("Day 18: warp per row; sum of squares; shfl_xor butterfly; scale and "
                              "store (40 lines)")


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
    fused_blocks = launch.grid_stride_blocks(x.shape[0] * WARP, THREADS, BLOCKS_PER_SM)
    l2norm_warp_kernel[fused_blocks, THREADS](d_x, y)
    return launch.result(y, x)
