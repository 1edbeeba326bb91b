"""Day 06: 1D convolution and the five memory spaces -- out[i] = sum_j mask[j] * x[i + j - RADIUS].

Inputs outside x count as zero, so out has the length of x ("same" convolution, as in image filters).

v1 naive      one thread per output: each of the MASK_WIDTH taps loads mask[j] and x[i + j - RADIUS]
              from global memory, so 2 * MASK_WIDTH loads feed MASK_WIDTH multiply-adds.
v2 optimized  register reuse: each thread copies the taps into registers once, then walks the grid
              OUTPUTS_PER_THREAD consecutive outputs at a time from a window of OUTPUTS_PER_THREAD +
              MASK_WIDTH - 1 inputs held in registers: 9 loads per output instead of 34.

The mask width is a compile-time constant: registers cannot be indexed at run time, so only loops
with a trip count the compiler knows can be unrolled into named registers (day 12 shows the spill you
get otherwise). Day 07 builds on that API.

Napkin math: 8 bytes per output through DRAM (one read, one write) and 2 * MASK_WIDTH = 34 FLOPs:
4.25 FLOP/byte, below the H200's ~16 FLOP/byte ridge (67 TFLOP/s FP32 / 4.1 TB/s), so the floor is
the copy rate: n = 2^26 moves 537 MB in ~0.13 ms. Naive misses it by 4x: its 34 loads per output
all hit L1, but each is a request the load/store unit must serve. A per-thread window is not
coalesced (lane t starts OUTPUTS_PER_THREAD elements after lane t - 1), so wider windows trade
fewer instructions for more L1 wavefronts; two outputs per thread is the measured sweet spot, and
day 08's shared-memory tile removes the trade.
"""

import numpy as np

from course import cuda, launch
from numba import float32  # numba names only after the course import

TITLE = "1D convolution: the five memory spaces, mask and window in registers"
MEMORY_SPACE = "register"
VERSIONS = ("naive", "optimized")
TEST_SIZES = (1, 9, 255, 257, 1021, 4099)  # 1 and 9: shorter than the mask, every tap at an edge
BENCH_SIZES = (1 << 26,)  # 268 MB in, 268 MB out: nine times the 60 MB L2
BOUND = "memory"

MASK_RADIUS = 8
MASK_WIDTH = 2 * MASK_RADIUS + 1  # 17 taps: wide enough that naive is limited by loads, not DRAM
THREADS = 256
OUTPUTS_PER_THREAD = 2  # measured on the H200: 2 beats 1, 4 and 8 (the lesson says why)
WINDOW = OUTPUTS_PER_THREAD + MASK_WIDTH - 1  # 18 inputs cover 2 outputs


def make_inputs(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n, dtype=np.float32)
    mask = rng.uniform(0.1, 1.0, MASK_WIDTH).astype(np.float32)
    mask /= mask.sum()  # a smoothing filter: outputs keep the scale of x
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
            if 0 <= k < n:  # the halo past either end of x is zero
                acc += mask[j] * x[k]
        out[i] = acc


@cuda.jit
def conv1d_registers_kernel(x, mask, out):
    n = x.size
    # Constant trip counts let the compiler unroll every loop below, so m[j] and w[q] become named
    # registers (stack frame 0); one runtime index anywhere would move the whole array to local memory.
    m = cuda.local.array(MASK_WIDTH, float32)
    for j in range(MASK_WIDTH):
        m[j] = mask[j]  # loaded once per thread, reused for every output it computes
    w = cuda.local.array(WINDOW, float32)
    chunk = cuda.grid(1)
    while chunk * OUTPUTS_PER_THREAD < n:
        first = chunk * OUTPUTS_PER_THREAD
        start = first - MASK_RADIUS
        for q in range(WINDOW):
            k = start + q
            # Clamp, then zero: one load per window slot on every path, and never an address outside x.
            v = x[min(max(k, 0), n - 1)]
            w[q] = v if 0 <= k < n else float32(0)
        for o in range(OUTPUTS_PER_THREAD):
            acc = float32(0)
            for j in range(MASK_WIDTH):
                acc += m[j] * w[o + j]  # every window slot is loaded once and read by each output it touches
            if first + o < n:
                out[first + o] = acc
        chunk += cuda.gridsize(1)


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
    blocks = launch.grid_stride_blocks(launch.blocks(x.size, OUTPUTS_PER_THREAD), THREADS)
    conv1d_registers_kernel[blocks, THREADS](d_x, d_mask, out)
    return launch.result(out, x, mask)


def library(x, mask):
    """The same filter through CuPy's ndimage (zero padding, centred mask): a benchmark row."""
    import cupy
    from cupyx.scipy import ndimage

    return ndimage.correlate1d(cupy.asarray(x), cupy.asarray(mask), mode="constant", cval=0.0)
