"""Day 06 exercise: 1D convolution -- out[i] = sum_j mask[j] * x[i + j - MASK_RADIUS], zeros outside x.

Write the two kernels below; the host functions that launch them are given (inputs and the NumPy
reference come from solutions/, as the grader takes them).
Read lessons/day06_conv1d_registers.md first: it opens with the five memory spaces.
Grade with:  make check DAY=6
"""

import numpy as np

from course import cuda, launch
from numba import float32  # noqa: F401  (you will need it; numba names only after the course import)

TITLE = "1D convolution: the five memory spaces, mask and window in registers"
MEMORY_SPACE = "register"
VERSIONS = ("naive", "optimized")

MASK_RADIUS = 8
MASK_WIDTH = 2 * MASK_RADIUS + 1  # 17 taps: wide enough that naive is limited by loads, not DRAM
THREADS = 256
WARP = 32
FULL_MASK = 0xFFFFFFFF
OUTPUTS_PER_THREAD = 8  # C: a lane's outputs are 32 apart, so a warp owns 32 * C consecutive ones
WARP_CHUNK = WARP * OUTPUTS_PER_THREAD  # 256 outputs per warp per trip
WINDOW_ROWS = OUTPUTS_PER_THREAD + 1  # C + 1 rows of 32 inputs: the chunk and its 16-input halo (16 <= 32)
# The solution's optimized kernel takes 56 registers: 4 blocks of 256 threads fit in an SM's 64 K
# registers, so a grid of 4 blocks per SM is resident at once and no second wave arrives late.
BLOCKS_PER_SM = 4


@cuda.jit
def conv1d_naive_kernel(x, mask, out):
    """One thread per output i = cuda.grid(1) (guard i < x.size).

    out[i] = sum over j in range(MASK_WIDTH) of mask[j] * x[i + j - MASK_RADIUS], where an index
    outside 0..n-1 contributes zero. Read mask and x straight from global memory.
    """
    raise NotImplementedError("Day 06: guard i < n, loop j over MASK_WIDTH taps skipping indices outside x, "
                              "accumulate in a float32, store (8 lines)")


@cuda.jit
def conv1d_registers_kernel(x, mask, out):
    """Mask and window in registers; each lane reads its neighbours' registers with cuda.shfl_sync.

    1. lane = cuda.threadIdx.x % WARP. Copy the MASK_WIDTH taps into
       m = cuda.local.array(MASK_WIDTH, float32) once per thread.
    2. Grid-stride over warp chunks: base = (cuda.grid(1) // WARP) * WARP_CHUNK, step
       (cuda.gridsize(1) // WARP) * WARP_CHUNK, while base < n. The same trip count for all 32 lanes:
       every lane must take part in every shuffle, even a lane whose outputs lie past the end of x.
    3. Window, r = cuda.local.array(WINDOW_ROWS, float32): r[k] = x[base - MASK_RADIUS + lane + WARP * k]
       for k in range(WINDOW_ROWS), zero where the index falls outside x (clamp the index before the
       load so it never leaves x). Each k is one coalesced warp load of 32 consecutive floats.
    4. Lane `lane` computes outputs o = base + lane + WARP * k, k in range(OUTPUTS_PER_THREAD), in
       acc = cuda.local.array(OUTPUTS_PER_THREAD, float32), zeroed each trip.
       Tap j of output o needs x[o + j - MASK_RADIUS]: register k of lane lane + j, or, once lane + j
       passes 31, register k + 1 of lane lane + j - 32. A shuffle returns what the source lane
       sends, so the sender chooses the row (lane >= j: its reader sits j lanes below, no wrap):
           here, next_row = r[k], r[k + 1]
           acc[k] += m[j] * cuda.shfl_sync(FULL_MASK, here if lane >= j else next_row, (lane + j) % WARP)
       Choose between the two values, not between r[k] and r[k + 1] themselves: a choice between
       array slots becomes an address, and an array with an address lives in local memory.
    5. Store out[o] = acc[k] where o < n.

    Only constant loop bounds (range(MASK_WIDTH), range(WINDOW_ROWS), range(OUTPUTS_PER_THREAD)): the
    compiler then unrolls the loops and m, r and acc live in registers (the grader checks stack frame 0,
    at most MASK_WIDTH + WINDOW_ROWS loads and at least MASK_WIDTH * OUTPUTS_PER_THREAD shuffles in PTX).
    """
    raise NotImplementedError("Day 06: taps into registers, then a warp-uniform grid-stride loop over warp "
                              "chunks: WINDOW_ROWS coalesced loads, one shfl_sync per tap per output, "
                              "guarded stores (28 lines)")


_SIG = "void(float32[::1], float32[::1], float32[::1])"
KERNELS = {"naive": (conv1d_naive_kernel, _SIG), "optimized": (conv1d_registers_kernel, _SIG)}


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
    blocks = launch.grid_stride_blocks(launch.blocks(x.size, OUTPUTS_PER_THREAD), THREADS, BLOCKS_PER_SM)
    conv1d_registers_kernel[blocks, THREADS](d_x, d_mask, out)
    return launch.result(out, x, mask)


def library(x, mask):
    """The same filter through CuPy's ndimage (zero padding, centred mask): a benchmark row."""
    import cupy
    from cupyx.scipy import ndimage

    return ndimage.correlate1d(cupy.asarray(x), cupy.asarray(mask), mode="constant", cval=0.0)
