"""Day 06: 1D convolution and the five memory spaces -- out[i] = sum_j mask[j] * x[i + j - RADIUS].

Inputs outside x count as zero, so out has the length of x ("same" convolution, as in image filters).

v1 naive      one thread per output, mask[j] and x[i + j - RADIUS] from global memory: 34 loads per output.
v2 optimized  taps and window in registers, lanes 32 outputs apart, neighbours by shfl_sync: 9/8 loads, 17 shuffles.

The mask width and the outputs per thread are compile-time constants: registers cannot be indexed at
run time, so only loops with a trip count the compiler knows unroll into named registers (day 12 shows
the spill you get otherwise). Day 07 builds on that API; day 17 goes deep into shuffles.

Napkin math: 8 bytes per output through DRAM (one read, one write) and 2 * MASK_WIDTH = 34 FLOPs:
4.25 FLOP/byte, below the H200's ~16 FLOP/byte ridge (67 TFLOP/s FP32 / 4.1 TB/s), so the floor is
the copy rate: n = 2^26 moves 537 MB in ~0.13 ms. Naive reaches a quarter of it: an SM's L1 serves
about one warp request per clock, and naive asks 34 per 32 outputs where DRAM allows 32 outputs per
~16 clocks. v2 loads the taps once per thread; a warp owns 256 consecutive outputs, reads them and their
halo in 9 coalesced 128-byte loads, and asks 17 shuffles (one warp-wide shuffle per clock per SM) per 32.
Giving each thread consecutive outputs from a private window is slower than naive: lanes start C
outputs apart, so every warp load spans 128 * C bytes for 128 useful ones (the lesson says why).
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
WARP = 32
FULL_MASK = 0xFFFFFFFF
OUTPUTS_PER_THREAD = 8  # C: a lane's outputs are 32 apart, so a warp owns 32 * C consecutive ones
WARP_CHUNK = WARP * OUTPUTS_PER_THREAD  # 256 outputs per warp per trip
WINDOW_ROWS = OUTPUTS_PER_THREAD + 1  # C + 1 rows of 32 inputs: the chunk and its 16-input halo (16 <= 32)
# The optimized kernel takes 56 registers: 4 blocks of 256 threads fit in an SM's 64 K registers, so a
# grid of 4 blocks per SM is resident at once and no second wave arrives late to stride over x.
BLOCKS_PER_SM = 4


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
    lane = cuda.threadIdx.x % WARP
    # Constant trip counts let the compiler unroll every loop below, so m, r and acc become named
    # registers (stack frame 0); one runtime index anywhere would move the whole array to local memory.
    m = cuda.local.array(MASK_WIDTH, float32)
    for j in range(MASK_WIDTH):
        m[j] = mask[j]  # loaded once per thread, reused for every output it computes
    r = cuda.local.array(WINDOW_ROWS, float32)  # this lane's column of the warp's window
    acc = cuda.local.array(OUTPUTS_PER_THREAD, float32)
    base = (cuda.grid(1) // WARP) * WARP_CHUNK  # first output of this warp's chunk
    step = (cuda.gridsize(1) // WARP) * WARP_CHUNK
    # The trip count is the same for all 32 lanes: lanes past the end of x stay in the loop,
    # because a shuffle reads a register of a lane that must be executing the same shuffle.
    while base < n:
        first = base - MASK_RADIUS + lane
        for k in range(WINDOW_ROWS):
            i = first + WARP * k
            # One warp load = 32 consecutive floats, 128 useful bytes. Clamp, then zero: the address
            # stays inside x, and the halo past either end reads as zero.
            v = x[min(max(i, 0), n - 1)]
            r[k] = v if 0 <= i < n else float32(0)
        for k in range(OUTPUTS_PER_THREAD):
            acc[k] = float32(0)
        for j in range(MASK_WIDTH):
            # Output base + lane + 32k needs window slot lane + j of row k: register k of lane
            # lane + j, or register k + 1 of lane lane + j - 32 once that passes the warp's end.
            # A shuffle delivers the value the source lane offers, so the source picks the row.
            src = (lane + j) % WARP
            for k in range(OUTPUTS_PER_THREAD):
                # Read both rows, then choose between the two values: choosing between r[k] and
                # r[k + 1] themselves lets the compiler choose an address, and an array with an
                # address lives in local memory.
                here, next_row = r[k], r[k + 1]
                acc[k] += m[j] * cuda.shfl_sync(FULL_MASK, here if lane >= j else next_row, src)
        for k in range(OUTPUTS_PER_THREAD):
            o = base + lane + WARP * k
            if o < n:
                out[o] = acc[k]  # lanes write 32 consecutive floats: one coalesced store per k
        base += step


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
