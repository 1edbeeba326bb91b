"""Day 08 exercise: shared-memory tiles with a halo -- 1D convolution, 17 taps, zeros outside x.

out[i] = sum_j mask[j] * x[i + j - MASK_RADIUS]. Write the two kernels; the host functions are given.
Grade with:  make check DAY=8
"""

import numpy as np

from course import cuda, launch
from numba import float32, uint64  # noqa: F401  (you will need them; numba names only after the course import)

TITLE = "Shared-memory tiles with a halo"
MEMORY_SPACE = "shared"
VERSIONS = ("naive", "optimized")

MASK_RADIUS = 8
MASK_WIDTH = 2 * MASK_RADIUS + 1
THREADS = 256  # naive
TILE_THREADS = 128
# Odd on purpose: lane t reads shared word 15t + q, and 15 is coprime with the 32 banks, so the 32
# lanes of a warp hit 32 different banks (with 16 they would collide sixteen ways). Fifteen outputs
# a thread spread the per-thread set-up (17 mask loads, the tile test) and the window's 16 extra
# loads thinly: ~30 instructions an output, 17 of them FMAs.
OUTPUTS_PER_THREAD = 15
TILE = TILE_THREADS * OUTPUTS_PER_THREAD  # 1920 outputs per block
SPAN = TILE + 2 * MASK_RADIUS  # 1936 inputs staged: the tile and its halo
WINDOW = OUTPUTS_PER_THREAD + MASK_WIDTH - 1
STAGE_PASSES = -(-SPAN // TILE_THREADS)  # 16 passes of 128 consecutive inputs cover the span

@cuda.jit
def conv1d_naive_kernel(x, mask, out):
    """One thread per output i = cuda.grid(1), guard i < n: out[i] = sum over j in range(MASK_WIDTH)
    of mask[j] * x[i + j - MASK_RADIUS], skipping indices outside x (day 06's naive kernel)."""
    raise NotImplementedError("Day 08: day 06's naive kernel (8 lines)")


@cuda.jit
def conv1d_tiled_kernel(x, mask, out):
    """Block b owns outputs first = b * TILE .. first + TILE - 1; it has TILE_THREADS threads.

    1. Taps into m = cuda.local.array(MASK_WIDTH, float32) first (their latency hides behind step 2).
    2. tile = cuda.shared.array(SPAN, float32) holds x[first - MASK_RADIUS .. first + TILE + MASK_RADIUS - 1]
       (zero outside x). Thread t loads slots t, t + TILE_THREADS, ... (STAGE_PASSES of them) so each
       warp's load is coalesced. If the whole span is inside x (every block but the first and last),
       use uint64 indices and no clamp; otherwise clamp the index into x and write zero outside it.
       Then cuda.syncthreads().
    3. Thread t computes outputs first + 15t .. first + 15t + 14 (OUTPUTS_PER_THREAD = 15) from a register
       window w of WINDOW slots read from tile[15t ..] (a uint64 base plus constants), and parks them
       in result = cuda.shared.array(TILE, ...).
    4. cuda.syncthreads(), then write result[s] to out[first + s] for s = t, t + TILE_THREADS, ...:
       unguarded (uint64 indices) when the whole tile is inside x, else guarded by first + s < n.
    """
    raise NotImplementedError("Day 08: stage tile + halo, barrier, register window from shared, "
                              "barrier, coalesced write-back (40 lines)")


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
