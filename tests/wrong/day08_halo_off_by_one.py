"""Day 08 (deliberately wrong): shared-memory tiles with a halo -- the 17-tap 1D convolution of day 06, staged on chip.

out[i] = sum_j mask[j] * x[i + j - MASK_RADIUS], zeros outside x.

MISTAKE: the tile is staged from first - MASK_RADIUS + 1, one element late, so every
window is shifted by one input.

v1 naive      one thread per output: 17 neighbour loads of x and 17 of mask from global memory; the
              neighbours hit L1, but every one is a load request the SM must serve.
v2 optimized  each block stages its tile of TILE outputs plus a MASK_RADIUS halo on each side in shared
              memory with coalesced loads (each input leaves DRAM once per block), one barrier, then
              each thread computes OUTPUTS_PER_THREAD consecutive outputs from a register window read
              out of shared memory, parks them in shared memory, and after a second barrier the block
              writes its tile back with coalesced stores.

Napkin math: 8 bytes and 34 FLOPs per output; n = 2^26 moves 537 MB, ~0.13 ms at the copy rate.
Per warp of 32 outputs naive makes 34 L1 requests; the tile makes about 8 (a coalesced global load,
a shared store, 23/7 conflict-free shared loads, a shared store and load of the result, a coalesced
global store): under the ~16 clocks DRAM needs, so the bound becomes DRAM again.
"""

import numpy as np

from course import cuda, launch
from numba import float32  # numba names only after the course import

TITLE = "Shared-memory tiles with a halo"
MEMORY_SPACE = "shared"
VERSIONS = ("naive", "optimized")
TEST_SIZES = (1, 9, 895, 897, 2053, 4099)  # a tile -1 and +1 (896 outputs), primes
BENCH_SIZES = (1 << 26,)  # 268 MB in, 268 MB out: nine times the 60 MB L2
BOUND = "memory"

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
    n = x.size
    i = cuda.grid(1)
    if i < n:
        acc = float32(0)
        for j in range(MASK_WIDTH):
            k = i + j - MASK_RADIUS
            if 0 <= k < n:
                acc += mask[j] * x[k]  # neighbour i + 1 loads 16 of these 17 inputs again
        out[i] = acc


@cuda.jit
def conv1d_tiled_kernel(x, mask, out):
    tile = cuda.shared.array(SPAN, float32)  # (TILE + 2 * MASK_RADIUS,) inputs of this block
    result = cuda.shared.array(TILE, float32)  # (TILE,) outputs, parked for a coalesced write-back
    n = x.size
    t = cuda.threadIdx.x
    first = cuda.blockIdx.x * TILE
    base = first - MASK_RADIUS + 1  # MISTAKE: halo off by one
    # Consecutive threads load consecutive inputs: every warp-wide load is one 128-byte request.
    s = t
    while s < SPAN:
        k = base + s
        v = x[min(max(k, 0), n - 1)]
        tile[s] = v if 0 <= k < n else float32(0)  # the halo past either end of x is zero
        s += TILE_THREADS
    m = cuda.local.array(MASK_WIDTH, float32)
    for j in range(MASK_WIDTH):
        m[j] = mask[j]  # issued before the barrier, so their latency overlaps the wait
    cuda.syncthreads()  # the halo a thread reads was loaded by its neighbours

    w = cuda.local.array(WINDOW, float32)
    own = t * OUTPUTS_PER_THREAD
    for q in range(WINDOW):
        w[q] = tile[own + q]
    for o in range(OUTPUTS_PER_THREAD):
        acc = float32(0)
        for j in range(MASK_WIDTH):
            acc += m[j] * w[o + j]
        result[own + o] = acc
    cuda.syncthreads()  # a thread writes back outputs that other threads computed

    s = t
    while s < TILE and first + s < n:
        out[first + s] = result[s]
        s += TILE_THREADS


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
