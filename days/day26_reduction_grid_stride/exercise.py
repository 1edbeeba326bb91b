"""Day 26 exercise: reduction IV, grid-stride and one pass -- out[0] = sum_i x[i], x float32 (n,), out (1,).

v1 naive      day 25's optimized version: one element pair per thread (n / 512 blocks, 524288 at
              2^28), warp shuffles, one partial per block, then passes over the partials until one
              value is left (four launches at 2^28).
v2 optimized  a grid sized to the GPU (4 blocks of 256 threads per SM, all resident at once) and a
              grid-stride loop: each thread loads 8 words of 8 bytes a trip (16 floats, 64 bytes in
              flight; x seen as uint64 words, read back as floats from the same registers), adds
              them as a depth-4 tree and then into its accumulator; the block folds its 256
              accumulators with shuffles (day 25), one partial per block, and the same kernel run
              once more as a single block turns the ~528 partials into the (1,) result.
library       cupy.sum (CUB's DeviceReduce: the same two-kernel shape, 16 floats a thread).

Napkin math: 4 bytes read and one add per element. 2^28 floats are 1 GiB, ~18x the L2: at the
H200's ~4.2 TB/s copy rate ~0.26 ms (a pure read may go a little faster: CUB's sum reads at about
the copy rate). Little's law: ~4.4 TB/s x ~0.7 us of DRAM latency is ~3 MB in flight, ~23 KB per
SM; 1024 threads an SM x 64 bytes a trip is 64 KB, with room to spare. The second pass reads 2 KB.
Accuracy: every float reaches the result through at most ~150 float32 additions (about 124 trips,
the trip tree, the block and the second pass), a worst-case error of 150 x 2^-24 ~ 9e-6 of
sum(|x|); the grid grows when a GPU is small so that no thread makes more than MAX_TRIPS trips.

What you write (each raises NotImplementedError with its hint until you do):
  grid_stride_sum_kernel  grid-stride over the words, eight loads a trip then a tree into acc; the tail words; the
                          stray floats (22 lines)
Everything else in this file is given. Grade with:  make check DAY=26
"""

import numpy as np

from course import cuda, launch
from numba import float32, uint64
from solutions.day25_reduction_last_warp import (  # day 25's block reduction, given here
    THREADS,
    WARP,
    WARPS,
    block_sum_shuffle_kernel,
    check_input,
    warp_sum,
)
from solutions.day25_reduction_last_warp import optimized as day25_optimized
from solutions.day23_reduction_interleaved import (  # noqa: F401  (the days' problem: the graders read these)
    RTOL,
    make_inputs,
    reference,
    traffic,
)

TITLE = "Reduction IV: grid-stride and one pass"
MEMORY_SPACE = "shared"
VERSIONS = ("naive", "optimized")
WORDS_PER_TRIP = 8  # 8-byte words a thread loads per trip: 16 floats, 64 bytes in flight
FLOATS_PER_TRIP = 2 * WORDS_PER_TRIP
BLOCKS_PER_SM = 4  # 4 x 256 threads resident per SM at up to 64 registers a thread: one wave, no tail
MAX_TRIPS = 128  # per thread: keeps the float32 accumulation chains short (see the docstring)
# One element; two (one word); a word's worth odd; a block's words -1/+1; primes. The grid-stride
# trips themselves are tested at a larger size in the grader.
TEST_SIZES = (1, 2, 3, 511, 513, 1021, 4099)
BENCH_SIZES = (1 << 28,)  # 1 GiB: ~18x the 60 MB L2
BOUND = "memory"


@cuda.jit
def grid_stride_sum_kernel(x, xw, head, partials):  # x (n,), xw (m,) uint64, partials (gridDim.x,)
    """Block b writes partials[b], its share of sum(x); the grid's partials add up to sum(x).

    xw is x[head : head + 2 m] seen as m uint64 words (the same memory, 8-byte aligned; head is 0
    or 1), so the floats outside the words are x[:head] and x[head + 2 m:], at most two.

    You write the thread's accumulator acc (float32), given the word registers w and their float
    view f (f[2k], f[2k + 1] are the two floats of w[k]):
    1. the grid-stride loop: i = cuda.grid(1), stride = cuda.gridsize(1), both uint64; while all
       eight words i, i + stride, ..., i + 7 stride are inside xw, load them into w[0 .. 7] (all
       loads before any add: 64 bytes in flight), add the 16 floats as a balanced tree, add that
       into acc, and step i by 8 strides;
    2. the tail: the remaining words one at a time (i < m), each as f[0] + f[1] into acc;
    3. the floats outside the words: thread 0 of the grid adds x[:head] and x[head + 2 m:].
    Then (given) the block folds the 256 accumulators as day 25 did and lane 0 stores partials[b].
    """
    warp_sums = cuda.shared.array(WARPS, float32)
    t = cuda.threadIdx.x
    # The words a thread holds, read as floats: the same registers under two names (a view changes the
    # type, not the bits). Constant indexes only, so both stay in registers (stack frame 0).
    w = cuda.local.array(WORDS_PER_TRIP, uint64)
    f = w.view(np.float32)
    acc = float32(0.0)
    raise NotImplementedError("Day 26: grid-stride over the words, eight loads a trip then a tree into acc; the tail "
                              "words; the stray floats (22 lines)")
    # Day 25's block reduction: shuffles in each warp, a slot a warp, one barrier, warp 0 folds.
    lane = t % WARP
    warp = t // WARP
    v = warp_sum(acc)
    if lane == 0:
        warp_sums[warp] = v
    cuda.syncthreads()
    if warp == 0:
        v = warp_sum(warp_sums[lane] if lane < WARPS else float32(0.0))
        if lane == 0:
            partials[cuda.blockIdx.x] = v


_SIG_DAY25 = "void(float32[::1], float32[::1])"
_SIG = "void(float32[::1], uint64[::1], int64, float32[::1])"
KERNELS = {"naive": (block_sum_shuffle_kernel, _SIG_DAY25), "optimized": (grid_stride_sum_kernel, _SIG)}


def _address(d) -> int:
    """The device address of d's first element (the simulator's stand-in keeps a NumPy array)."""
    cai = getattr(d, "__cuda_array_interface__", None)
    if cai is not None:
        return cai["data"][0]
    return d.__array_interface__["data"][0]


def as_words(d):
    """(head, words): d's floats from `head` on as uint64 words, head = 1 when d starts 4 bytes past
    an 8-byte boundary (a view such as x[1:]): an 8-byte load must be 8-byte aligned."""
    head = 1 if d.size and _address(d) % 8 else 0
    count = (d.size - head) // 2
    return head, d[head:head + 2 * count].view(np.uint64)


def grid_blocks(words: int) -> int:
    """A grid the GPU holds at once (BLOCKS_PER_SM a SM), never more blocks than there are full
    trips, and enough that no thread makes more than MAX_TRIPS trips."""
    per_block_trip = THREADS * WORDS_PER_TRIP
    blocks = launch.grid_stride_blocks(words, per_block_trip, BLOCKS_PER_SM)
    return max(blocks, launch.blocks(words, per_block_trip * MAX_TRIPS))


def sum_device(d_x):
    """The (1,) device array of sum(d_x): the grid-stride kernel, then the same kernel as one block
    over the partials (a tiny second pass: no zeroed output, no atomics, the same answer every run)."""
    head, xw = as_words(d_x)
    partials = launch.empty((grid_blocks(xw.size),), np.float32)
    grid_stride_sum_kernel[partials.size, THREADS](d_x, xw, head, partials)
    out = launch.empty((1,), np.float32)
    head, pw = as_words(partials)
    grid_stride_sum_kernel[1, THREADS](partials, pw, head, out)
    return out


def naive(x):
    return day25_optimized(x)


def optimized(x):
    check_input(x)
    (d_x,) = launch.to_device(x)
    return launch.result(sum_device(d_x), x)


def library(x):
    """CuPy's sum (CUB's device reduction), as shape (1,): the row the targets compare with."""
    import cupy

    return cupy.sum(cupy.asarray(x)).reshape(1)
