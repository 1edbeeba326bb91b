"""Day 08 exercise: shared-memory tiles with a halo -- the 17-tap 1D convolution of day 06, staged on chip.

out[i] = sum_j mask[j] * x[i + j - MASK_RADIUS], zeros outside x.

v1 naive      one thread per output: 17 neighbour loads of x and 17 of mask from global memory; the
              neighbours hit L1, but every one is a load request the SM must serve.
v2 optimized  each block stages its tile of TILE outputs plus a MASK_RADIUS halo on each side in shared
              memory with coalesced loads (each input leaves DRAM once per block), one barrier, then
              each thread computes OUTPUTS_PER_THREAD = 15 consecutive outputs from a register window
              read out of shared memory, parks them in shared memory, and after a second barrier the
              block writes its tile back with coalesced stores. Interior blocks (the span inside x)
              stage with no clamp and unsigned indices, whole tiles store with no guard: only the
              first and last block pay for the ends of x.

Napkin math: 8 bytes and 34 FLOPs per output; n = 2^26 moves 537 MB, ~0.13 ms at the copy rate, ~16
SM clocks per warp of 32 outputs: ~16 L1 requests and ~64 warp-instructions (four schedulers).
Naive makes 34 L1 requests per warp. The tile makes about 5 (a coalesced global load, a shared
store, 31/15 conflict-free shared loads, a shared store and load of the result, a coalesced global
store). The first tiled version (7 outputs a thread, runtime staging loops with a clamp on every
load, signed indices) issued ~110 SASS instructions an output and reached 41 % of the copy rate: it
was bound by instructions, not requests. An interior thread here issues ~30 an output (17 FFMA,
~2 LDS for the window, ~3 to stage, ~2.4 to park and store, set-up), under the budget: DRAM binds.

What you write (each raises NotImplementedError with its hint until you do):
  conv1d_naive_kernel  day 06's naive kernel (9 lines)
  conv1d_tiled_kernel  stage tile + halo, barrier, register window from shared, barrier, coalesced write-back (42
                       lines)
Everything else in this file is given. Grade with:  make check DAY=8
"""

import numpy as np

from course import cuda, launch
from numba import float32, uint64  # numba names only after the course import

TITLE = "Shared-memory tiles with a halo"
MEMORY_SPACE = "shared"
VERSIONS = ("naive", "optimized")
TEST_SIZES = (1, 9, 1919, 1921, 4099, 6151)  # a tile -1 and +1 (1920 outputs), primes (interior tiles)
BENCH_SIZES = (1 << 26,)  # 268 MB in, 268 MB out: nine times the 60 MB L2
BOUND = "memory"

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


def make_inputs(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n, dtype=np.float32)
    mask = rng.uniform(0.1, 1.0, MASK_WIDTH).astype(np.float32)
    mask /= mask.sum()
    return x, mask


def reference(x, mask):
    n = x.size
    padded = np.pad(x.astype(np.float64), MASK_RADIUS)  # zeros beyond both ends
    out = np.zeros(n)
    for j in range(MASK_WIDTH):
        out += float(mask[j]) * padded[j:j + n]
    return out.astype(np.float32)


def traffic(x, mask):
    """(minimum bytes moved through device memory, floating-point operations)."""
    return 2 * x.size * x.itemsize + mask.nbytes, 2 * MASK_WIDTH * x.size


@cuda.jit
def conv1d_naive_kernel(x, mask, out):
    """One thread per output i = cuda.grid(1), guard i < n: out[i] = sum over j in range(MASK_WIDTH)
    of mask[j] * x[i + j - MASK_RADIUS], skipping indices outside x (day 06's naive kernel)."""
    raise NotImplementedError("Day 08: day 06's naive kernel (9 lines)")


@cuda.jit
def conv1d_tiled_kernel(x, mask, out):
    """Block b owns outputs first = b * TILE .. first + TILE - 1; it has TILE_THREADS threads.

    1. Taps into m = cuda.local.array(MASK_WIDTH, float32) first (their latency hides behind step 2).
    2. tile = cuda.shared.array(SPAN, float32) holds x[first - MASK_RADIUS .. first + TILE + MASK_RADIUS - 1]
       (zero outside x). Thread t loads slots t, t + TILE_THREADS, ... (STAGE_PASSES of them), so each
       warp's load is coalesced. If the whole span is inside x (every block but the first and last),
       use uint64 indices and no clamp; otherwise clamp the index into x and write zero outside it.
       Then cuda.syncthreads().
    3. Thread t computes outputs first + 15t .. first + 15t + 14 (OUTPUTS_PER_THREAD = 15) from a
       register window w of WINDOW slots read from tile[15t ..] (a uint64 base plus constants), and
       parks them in result = cuda.shared.array(TILE, float32).
    4. cuda.syncthreads(), then write result[s] to out[first + s] for s = t, t + TILE_THREADS, ...:
       unguarded (uint64 indices) when the whole tile is inside x, else guarded by first + s < n.

    The grader checks the idea (the inputs staged in shared memory, a barrier before they are read,
    no local memory), not this exact scheme: another correct tiling passes too.
    """
    raise NotImplementedError("Day 08: stage tile + halo, barrier, register window from shared, barrier, coalesced "
                              "write-back (42 lines)")


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
