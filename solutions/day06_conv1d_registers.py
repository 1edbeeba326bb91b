"""Day 06: 1D convolution and the five memory spaces -- out[i] = sum_j mask[j] * x[i + j - RADIUS].

Inputs outside x count as zero, so out has the length of x ("same" convolution, as in image filters).

v1 naive      one thread per output, mask[j] and x[i + j - RADIUS] from global memory: 34 loads per output.
v2 optimized  taps and window in registers: a lane owns V = 8 consecutive outputs, loads its 8 inputs as
              four 8-byte words, takes the 16 inputs after them from the next two lanes by shfl_sync,
              and stores its outputs as four words.

The mask width and the outputs per lane are compile-time constants: registers cannot be indexed at
run time, so only loops with a trip count the compiler knows unroll into named registers (day 12 shows
the spill you get otherwise). Day 07 builds on that API; day 17 goes deep into shuffles. Read
lessons/day06_conv1d_registers.md first: it opens with the five memory spaces and teaches the one
warp shuffle (cuda.shfl_sync) v2 needs.

Napkin math: 8 bytes per output through DRAM (one read, one write) and 2 * MASK_WIDTH = 34 FLOPs:
4.25 FLOP/byte, below the H200's ~16 FLOP/byte ridge (67 TFLOP/s FP32 / 4.1 TB/s), so the floor is
the copy rate: n = 2^26 moves 537 MB in ~0.13 ms, ~16 SM clocks per 32 outputs. Naive reaches a
quarter of it: an SM's L1 serves about one warp request per clock, and naive asks 34 per 32 outputs.
Every load, store and shuffle goes through that same pipe. An earlier v2 (lanes 32 outputs apart,
one 4-byte row load per 32 outputs, a shuffle per tap) asked ~19 per 32 outputs and measured 47 % on
the H200: over budget. This v2 asks ~10: per 256 outputs a warp issues four 8-byte loads and four
stores spanning 1 KB each (8 lines apiece), two lanes' halo loads, and 16 shuffles; the 17 FMAs per
output (4 a clock per SM) stay under the budget too.
"""

import numpy as np

from course import cuda, launch
from numba import float32, uint64  # numba names only after the course import

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
V = 8  # consecutive inputs and outputs per lane: four 8-byte words
ROW = WARP * V  # 256 consecutive outputs per warp per trip
OUTPUTS_PER_THREAD = V
LANE_WORDS = V // 2
LANE_SPAN = (2 * MASK_RADIUS + V - 1) // V + 1  # lanes whose inputs one lane's outputs need: itself + 2
LANE_WINDOW = LANE_SPAN * V  # 24 slots for the 2 * RADIUS + V = 24 consecutive inputs
HALO_LANES = LANE_SPAN - 1  # lanes of the next row the last lanes reach into
WINDOW_WORDS = 2 * LANE_WORDS  # this row and the next, in words
# The optimized kernel takes ~45 registers: 5 blocks of 256 threads fit in an SM's 64 K registers, so
# a grid of 5 blocks per SM is resident at once and no second wave arrives late to stride over x.
BLOCKS_PER_SM = 5


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
    """One thread per output i = cuda.grid(1) (guard i < x.size).

    out[i] = sum over j in range(MASK_WIDTH) of mask[j] * x[i + j - MASK_RADIUS], where an index
    outside 0 .. n - 1 contributes zero. Read mask and x straight from global memory.
    """
    # EXERCISE: guard i < n, loop j over MASK_WIDTH taps skipping indices outside x, accumulate in a float32, store
    n = x.size
    i = cuda.grid(1)
    if i < n:
        acc = float32(0)
        for j in range(MASK_WIDTH):
            k = i + j - MASK_RADIUS
            if 0 <= k < n:  # the halo past either end of x is zero
                acc += mask[j] * x[k]
        out[i] = acc


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
        """Mask and window in registers; inputs and outputs move as 8-byte words; a lane takes its
        neighbours' inputs from their registers with warp shuffles. x_words and out_words are x and
        out seen as uint64 words (two floats each) over their first even number of elements: the
        same memory.

        A warp owns a row of ROW = 32 * V consecutive outputs per trip of a grid-stride loop; lane
        `lane` (0 .. 31) computes outputs o = base + lane * V .. o + V - 1. Given: the taps in m (once
        per thread), the register arrays, the loop, and the shuffle exchange between the two parts
        you write in each trip:

        1. The loads. The window starts a radius early, start = base - MASK_RADIUS. Fill r, the
           registers rw read as 2 * V floats, with the lane's V inputs of this row and of the next:
           r[e] = x[start + lane * V + e] and r[V + e] = x[start + ROW + lane * V + e].
           - If start >= 0 and start + 2 * ROW <= 2 * x_words.size, load LANE_WORDS words,
             rw[h] = x_words[uint64(start // 2) + uint64(lane * LANE_WORDS + h)], and the next row's
             words (ROW // 2 further) only where lane < HALO_LANES: uint64(0) elsewhere, as no lane
             reads the others' next row.
           - Otherwise (a row that touches either end of x) load the 2 * V floats one at a time,
             clamping the index into x and putting zero where it falls outside x.
        2. The outputs. After the exchange w holds the lane's LANE_WINDOW = V + 2 * MASK_RADIUS
           consecutive inputs, w[t] = x[start + lane * V + t]. For e in range(V):
           acc[e] = sum over j in range(MASK_WIDTH) of m[j] * w[e + j] (acc: the registers accw read
           as floats). Store them as words, out_words[uint64(o // 2) + uint64(h)] = accw[h], when
           o + V <= 2 * out_words.size; else one float at a time, out[o + e] where o + e < n.

        Only constant loop bounds (V, 2 * V, LANE_WORDS, MASK_WIDTH): the compiler then unrolls the
        loops, every index into m, rw, w and accw is a constant, and the arrays stay in registers.
        The grader checks that in the PTX (stack frame 0), with fewer loads per output than taps,
        8-byte loads and stores, and the shuffles.
        """
        n = x.size
        lane = cuda.threadIdx.x % WARP  # the thread's place in its warp of 32
        # Constant trip counts let the compiler unroll every loop below, so m, rw, w and accw become
        # named registers (stack frame 0); one runtime index anywhere would move the array to local memory.
        m = cuda.local.array(MASK_WIDTH, float32)
        fill_taps(m, taps)  # once per thread, reused for every output it computes
        # This lane's V inputs of the warp's row and of the row after it, loaded as 8-byte words and read
        # as floats: the same registers under two names (a view changes the type, not the bits).
        rw = cuda.local.array(WINDOW_WORDS, uint64)
        r = rw.view(np.float32)
        w = cuda.local.array(LANE_WINDOW, float32)  # the 2 * RADIUS + V inputs this lane's outputs need
        accw = cuda.local.array(LANE_WORDS, uint64)  # the V outputs, stored as words
        acc = accw.view(np.float32)
        base = (cuda.grid(1) // WARP) * ROW  # first output of this warp's row of 32 * V
        step = (cuda.gridsize(1) // WARP) * ROW
        # The trip count is the same for all 32 lanes: lanes past the end of x stay in the loop,
        # because a shuffle reads a register of a lane that must be executing the same shuffle.
        while base < n:
            # EXERCISE: load r, the lane's V inputs of this row and the next: words inside x, floats at the ends
            start = base - MASK_RADIUS  # the window starts a radius early: every tap offset is >= 0
            if start >= 0 and start + 2 * ROW <= 2 * x_words.size:
                # Inside x: the lane's V inputs are V / 2 words from one address (offsets 0, 8, 16, 24
                # bytes fold into the loads). Of the next row only the first HALO_LANES lanes' inputs are
                # ever needed, so only those lanes load them.
                first = uint64(start // 2) + uint64(lane * LANE_WORDS)
                for h in range(LANE_WORDS):
                    rw[h] = x_words[first + uint64(h)]
                for h in range(LANE_WORDS):
                    rw[LANE_WORDS + h] = x_words[first + uint64(ROW // 2 + h)] if lane < HALO_LANES else uint64(0)
            else:
                # A row that touches either end: one input at a time, clamped, the halo read as zero.
                for e in range(2 * V):
                    i = start + (e // V) * ROW + lane * V + e % V
                    v = x[min(max(i, 0), n - 1)]
                    r[e] = v if 0 <= i < n else float32(0)
            # END EXERCISE
            # The exchange. A warp's 32 lanes execute each instruction together, and
            # cuda.shfl_sync(FULL_MASK, value, src) is one instruction for all of them: every lane hands
            # over `value` and gets back the value lane `src` handed over, register to register through
            # the SM's crossbar, no memory. FULL_MASK (one bit per lane, all 32 set) says every lane
            # takes part, so every lane must reach every shuffle: hence the warp-uniform loop above.
            # Output base + lane * V + e needs window inputs t = e .. e + 2 * RADIUS counted from this
            # lane's first: element t % V of lane lane + t // V, taken from the next row once that lane
            # passes the warp's end. A shuffle delivers what the source offers, so the source (d lanes
            # ahead, or d - 32 in the next row) picks the row: the lanes below d offer their next row.
            for e in range(V):
                w[e] = r[e]
            for d in range(1, LANE_SPAN):
                src = (lane + d) % WARP
                for e in range(V):
                    # Read both rows, then choose between the two values: choosing between array slots
                    # lets the compiler choose an address, and an array with an address lives in local
                    # memory.
                    here, next_row = r[e], r[V + e]
                    w[d * V + e] = cuda.shfl_sync(FULL_MASK, here if lane >= d else next_row, src)
            # EXERCISE: acc[e] = the V dot products of m with w[e:e + MASK_WIDTH]; store accw as words (floats past n)
            for e in range(V):
                a = float32(0)
                for j in range(MASK_WIDTH):
                    a += m[j] * w[e + j]
                acc[e] = a
            o = base + lane * V  # this lane's first output
            if o + V <= 2 * out_words.size:
                for h in range(LANE_WORDS):
                    out_words[uint64(o // 2) + uint64(h)] = accw[h]
            else:
                for e in range(V):
                    if o + e < n:
                        out[o + e] = acc[e]
            # END EXERCISE
            base += step

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
