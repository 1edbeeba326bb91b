"""Day 06 exercise: 1D convolution -- out[i] = sum_j mask[j] * x[i + j - MASK_RADIUS], zeros outside x.

Write the two kernels below; the host functions that launch them are given (inputs and the NumPy
reference come from solutions/, as the grader takes them).
Read lessons/day06_conv1d_registers.md first: it opens with the five memory spaces.
Grade with:  make check DAY=6
"""

import numpy as np

from course import cuda, launch
from numba import float32, uint64  # noqa: F401  (you will need them; numba names only after the course import)

TITLE = "1D convolution: the five memory spaces, mask and window in registers"
MEMORY_SPACE = "register"
VERSIONS = ("naive", "optimized")

MASK_RADIUS = 8
MASK_WIDTH = 2 * MASK_RADIUS + 1  # 17 taps: wide enough that naive is limited by loads, not DRAM
THREADS = 256
WARP = 32
FULL_MASK = 0xFFFFFFFF
V = 8  # consecutive inputs and outputs per lane: four 8-byte words
ROW = WARP * V  # 256 consecutive outputs per warp per trip
OUTPUTS_PER_THREAD = V
LANE_WORDS = V // 2
LANE_SPAN = (2 * MASK_RADIUS + V - 1) // V + 1  # lanes whose inputs one lane's outputs need: itself + 2
LANE_WINDOW = LANE_SPAN * V  # 24 slots for the 2 * RADIUS + V = 24 consecutive inputs
HALO_LANES = LANE_SPAN - 1  # lanes of the next row the last lanes reach into
WINDOW_WORDS = 2 * LANE_WORDS  # this row and the next, in words
# The solution's optimized kernel takes ~45 registers: 5 blocks of 256 threads fit in an SM's 64 K registers, so
# a grid of 5 blocks per SM is resident at once and no second wave arrives late to stride over x.
BLOCKS_PER_SM = 5


@cuda.jit
def conv1d_naive_kernel(x, mask, out):
    """One thread per output i = cuda.grid(1) (guard i < x.size).

    out[i] = sum over j in range(MASK_WIDTH) of mask[j] * x[i + j - MASK_RADIUS], where an index
    outside 0..n-1 contributes zero. Read mask and x straight from global memory.
    """
    raise NotImplementedError("Day 06: guard i < n, loop j over MASK_WIDTH taps skipping indices outside x, "
                              "accumulate in a float32, store (8 lines)")


@cuda.jit(device=True, inline=True)
def taps_from_array(m, mask):
    """The taps from a global array, copied into the thread's registers m."""
    for j in range(MASK_WIDTH):
        m[j] = mask[j]


def window_kernel(fill_taps):
    """The optimized kernel, taking its taps from ``fill_taps(m, taps)``: a device function that fills
    m (MASK_WIDTH floats in registers) from the kernel's ``taps`` argument. Here taps is a global
    array (taps_from_array); day 07 passes a filter index and reads its constant-memory bank. Numba
    compiles the device function inline, so m stays in registers either way."""

    @cuda.jit
    def conv1d_registers_kernel(x, x_words, taps, out, out_words):
        """Mask and window in registers, inputs and outputs moved as 8-byte words; each lane reads its
        neighbours' registers with cuda.shfl_sync. x_words and out_words are x and out seen as uint64
        words (two floats each) over their first even number of elements: the same memory.

        1. lane = cuda.threadIdx.x % WARP. Fill m = cuda.local.array(MASK_WIDTH, float32) once per
           thread with fill_taps(m, taps) (given: taps_from_array copies the mask argument in).
        2. Grid-stride over warp rows of ROW = 32 * V outputs: base = (cuda.grid(1) // WARP) * ROW, step
           (cuda.gridsize(1) // WARP) * ROW, while base < n. The same trip count for all 32 lanes: every
           lane must take part in every shuffle, even a lane whose outputs lie past the end of x.
        3. Window: rw = cuda.local.array(WINDOW_WORDS, uint64) and r = rw.view(np.float32), the same
           registers as 2 * V floats: this lane's V inputs of the row that starts at
           start = base - MASK_RADIUS, then its V inputs of the next row. Lane `lane` holds
           x[start + lane * V + e] in r[e] and x[start + ROW + lane * V + e] in r[V + e].
           - If start >= 0 and start + 2 * ROW <= 2 * x_words.size, load words:
             rw[h] = x_words[uint64(start // 2) + uint64(lane * LANE_WORDS + h)], and the next row's
             words (ROW // 2 further) only where lane < HALO_LANES (the others: uint64(0)).
           - Otherwise load each of the 2 * V floats, clamping the index into x and using zero outside.
        4. The window of this lane's outputs: w = cuda.local.array(LANE_WINDOW, float32). w[e] = r[e];
           for d in range(1, LANE_SPAN) and e in range(V), w[d * V + e] is element e of lane lane + d,
           or of lane lane + d - 32 in the next row once that passes 31. A shuffle returns what the
           source sends, so the sender chooses the row (lane >= d: its reader sits d lanes below):
               here, next_row = r[e], r[V + e]
               w[d * V + e] = cuda.shfl_sync(FULL_MASK, here if lane >= d else next_row, (lane + d) % WARP)
           Choose between the two values, not between r[e] and r[V + e] themselves: a choice between
           array slots becomes an address, and an array with an address lives in local memory.
        5. Output base + lane * V + e is the sum over j of m[j] * w[e + j]. Keep the V sums in
           accw = cuda.local.array(LANE_WORDS, uint64) through acc = accw.view(np.float32), and store
           them as LANE_WORDS words out_words[uint64(o // 2) + uint64(h)] = accw[h] (o = base + lane * V)
           when o + V <= 2 * out_words.size, else one float at a time where o + e < n.

        Only constant loop bounds: the compiler then unrolls the loops and m, rw, w and accw live in
        registers. The grader checks stack frame 0, the loads per output, 8-byte loads and stores, and
        2 * MASK_RADIUS shuffles (one per input brought over, not one per tap) in the PTX.
        """
        raise NotImplementedError("Day 06: taps into registers, then a warp-uniform grid-stride loop over warp "
                                  "rows: load words (or floats at the ends), one shfl_sync per neighbour input, "
                                  "V dot products, word stores (50 lines)")

    return conv1d_registers_kernel


conv1d_registers_kernel = window_kernel(taps_from_array)


_SIG = "void(float32[::1], float32[::1], float32[::1])"
_SIG_WORDS = "void(float32[::1], uint64[::1], float32[::1], float32[::1], uint64[::1])"
KERNELS = {"naive": (conv1d_naive_kernel, _SIG), "optimized": (conv1d_registers_kernel, _SIG_WORDS)}


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
    return launch.result(launch_window(conv1d_registers_kernel, d_x, d_mask), x, mask)


def launch_window(kernel, d_x, taps):
    """Run a window_kernel over the device array d_x with its taps argument; returns the output."""
    out = launch.empty(d_x.shape, np.float32)
    even = d_x.size - d_x.size % 2  # the 8-byte views cover an even prefix (no copy); an odd last input goes alone
    x_words, out_words = launch.as_words(d_x[:even], 1)[0], launch.as_words(out[:even], 1)[0]
    blocks = launch.grid_stride_blocks(launch.blocks(d_x.size, OUTPUTS_PER_THREAD), THREADS, BLOCKS_PER_SM)
    kernel[blocks, THREADS](d_x, x_words, taps, out, out_words)
    return out


def library(x, mask):
    """The same filter through CuPy's ndimage (zero padding, centred mask): a benchmark row."""
    import cupy
    from cupyx.scipy import ndimage

    return ndimage.correlate1d(cupy.asarray(x), cupy.asarray(mask), mode="constant", cval=0.0)
