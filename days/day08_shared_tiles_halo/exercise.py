"""Day 08 exercise: shared-memory tiles with a halo -- 1D convolution, 17 taps, zeros outside x.

out[i] = sum_j mask[j] * x[i + j - MASK_RADIUS]. Write the two kernels; the host functions are given.
Grade with:  make check DAY=8
"""

import numpy as np

from course import cuda, launch
from numba import float32  # noqa: F401  (you will need it; numba names only after the course import)

TITLE = "Shared-memory tiles with a halo"
MEMORY_SPACE = "shared"
VERSIONS = ("naive", "optimized")

MASK_RADIUS = 8
MASK_WIDTH = 2 * MASK_RADIUS + 1
THREADS = 256  # naive
TILE_THREADS = 128
# Odd on purpose: lane t reads shared word 7t + q, and 7 is coprime with the 32 banks, so the 32
# lanes of a warp hit 32 different banks (with 8 they would collide eight ways).
OUTPUTS_PER_THREAD = 7
TILE = TILE_THREADS * OUTPUTS_PER_THREAD  # 896 outputs per block
SPAN = TILE + 2 * MASK_RADIUS  # 912 inputs staged: the tile and its halo
WINDOW = OUTPUTS_PER_THREAD + MASK_WIDTH - 1


@cuda.jit
def conv1d_naive_kernel(x, mask, out):
    """One thread per output i = cuda.grid(1), guard i < n: out[i] = sum over j in range(MASK_WIDTH)
    of mask[j] * x[i + j - MASK_RADIUS], skipping indices outside x (day 06's naive kernel)."""
    raise NotImplementedError("Day 08: day 06's naive kernel (8 lines)")


@cuda.jit
def conv1d_tiled_kernel(x, mask, out):
    """Block b owns outputs first = b * TILE .. first + TILE - 1; it has TILE_THREADS threads.

    1. tile = cuda.shared.array(SPAN, float32) holds x[first - MASK_RADIUS .. first + TILE + MASK_RADIUS - 1]
       (zero outside x). Thread t loads slots t, t + TILE_THREADS, ... so each warp's load is coalesced.
    2. Taps into m = cuda.local.array(MASK_WIDTH, float32); then cuda.syncthreads().
    3. Thread t computes outputs first + 7t .. first + 7t + 6 (OUTPUTS_PER_THREAD = 7) from a register
       window w of WINDOW slots read from tile[7t ..], and parks them in result = cuda.shared.array(TILE, ...).
    4. cuda.syncthreads(), then write result[s] to out[first + s] for s = t, t + TILE_THREADS, ... (< n).
    """
    raise NotImplementedError("Day 08: stage tile + halo, barrier, register window from shared, "
                              "barrier, coalesced write-back (30 lines)")


_SIG = "void(float32[::1], float32[::1], float32[::1])"
KERNELS = {"naive": (conv1d_naive_kernel, _SIG), "optimized": (conv1d_tiled_kernel, _SIG)}


def _check(x, mask):
    launch.check_array("x", x, dtype=np.float32, ndim=1)
    launch.check_array("mask", mask, dtype=np.float32, shape=(MASK_WIDTH,))


def naive(x, mask):
    _check(x, mask)
    d_x, d_mask = launch.to_device(x, mask)
    out = launch.empty(x.shape, np.float32)
    conv1d_naive_kernel[launch.blocks(x.size, THREADS), THREADS](d_x, d_mask, out)
    return launch.result(out, x, mask)


def optimized(x, mask):
    _check(x, mask)
    d_x, d_mask = launch.to_device(x, mask)
    out = launch.empty(x.shape, np.float32)
    conv1d_tiled_kernel[launch.blocks(x.size, TILE), TILE_THREADS](d_x, d_mask, out)
    return launch.result(out, x, mask)


def library(x, mask):
    """The same filter through CuPy's ndimage (zero padding, centred mask): a benchmark row."""
    import cupy
    from cupyx.scipy import ndimage

    return ndimage.correlate1d(cupy.asarray(x), cupy.asarray(mask), mode="constant", cval=0.0)
