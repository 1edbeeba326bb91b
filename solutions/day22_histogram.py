"""Day 22: histogram -- 256 bins of bytes, from global atomics to privatized, coarsened shared bins.

hist[b] = number of bytes of data equal to b, for b in 0..255 (np.bincount(data, minlength=256)).

v1 naive       one thread per byte, one global atomic each: every byte is a read-modify-write at
               the L2, and all n of them land on 256 addresses (1 KB, a few L2 slices); with every
               byte equal they all queue on one address.
v2 privatized  one element per thread still, but each block counts into its own 256 bins in shared
               memory (zeroed, barrier, shared atomics, barrier) and merges them with one global
               atomic per non-empty bin: same-value contention stays on chip. With one byte per
               thread the merge is still ~0.63 global atomics per byte on uniform data: the counting
               moved on chip, the global atomics did not go away yet.
v3 optimized   privatized + coarsened: a grid sized to the GPU (4 blocks of 512 per SM) reads the
               bytes as 16-byte chunks (four uint32 words, one ld.global.v4 a lane: 512 bytes a
               warp's request) in a grid-stride loop, LOADS = 2 chunks issued per thread before
               the first atomic (32 bytes in flight a thread), the < 32 bytes outside whole chunks
               counted byte by byte, into 32 copies of every bin (bin b, copy = lane at shared word
               32 b + lane: a warp's 32 atomics always fall in 32 different banks and 32 different
               words, whatever the bytes are), merged with 256 global atomics per block: ~528
               blocks x 256 instead of one per byte.

Napkin math (n = 2^28 bytes): 268 MB read, 1 KB written: 64 us at the H200's ~4.2 TB/s copy rate, and
the target (70 % of it) is ~91 us. That is 2^28 / 132 SMs / (91 us x 1.98 GHz) = ~11 bytes per SM per
clock: one shared atomic per byte, so ~0.35 warp-wide atomics per SM per clock, each a single
conflict-free wavefront in the replicated layout, plus ~3 integer instructions per byte to extract it
and form its address (~1.1 warp-instructions per clock of the 4 the SM can issue). Bytes in flight:
a thread loads a chunk, then spends 16 atomics on it before its next load leaves, so what is in
flight is what it loads at once: 8-byte words two at a time gave 16 bytes a thread, 32 KB an SM,
~1.5 us of the ~11 bytes a clock, about one loaded DRAM latency and no margin; two 16-byte chunks
give 64 KB (~3 us), and half the load instructions. The shared bins take 32 KB per block (4
blocks: 128 KB of the SM's 228 KB). The merge reads each copy rotated by the thread's bin, so it too
is conflict-free. cupy.bincount runs at ~2.2 % of the copy
rate on this job: the target is the machine, not the library.
"""

import numpy as np

from course import cuda, launch, wide
from numba import int32, uint32, uint64  # numba names only after the course import

TITLE = "Histogram: privatized shared-memory bins"
MEMORY_SPACE = "shared"
VERSIONS = ("naive", "privatized", "optimized")
TEST_SIZES = (1, 7, 255, 257, 1021, 4099)  # 1, under a word, a block -1/+1, primes (not multiples of 8)
BENCH_SIZES = (1 << 28,)  # 268 MB of bytes: four times the 60 MB L2
BOUND = "memory"

BINS = 256
THREADS = 256  # naive, privatized: one bin per thread in the privatized zeroing and merge
CHUNK = 16  # bytes per load in the optimized version: four uint32 words (course.wide.load4)
LOADS = 2  # 16-byte loads a thread issues before counting any of them: 32 bytes in flight
OPT_THREADS = 512  # optimized: 16 warps share one replicated histogram
COPIES = 32  # copies of every bin, one per lane: shared word COPIES * bin + lane
SLOTS = BINS * COPIES  # 8192 shared words, 32 KB per block
BLOCKS_PER_SM = 4  # 4 x 512 threads fill an SM; 4 x 32 KB of bins fit its shared memory


def make_inputs(n: int, seed: int = 0):
    """Uniform random bytes, (n,) uint8."""
    rng = np.random.default_rng(seed)
    return (rng.integers(0, BINS, size=n, dtype=np.uint8),)


def skewed_inputs(n: int, seed: int = 0):
    """Bytes from a steep geometric law: about half of them 0, a quarter 1, ...: hot bins."""
    rng = np.random.default_rng(seed)
    return (np.minimum(rng.geometric(0.5, size=n) - 1, BINS - 1).astype(np.uint8),)


def reference(data):
    return np.bincount(data, minlength=BINS).astype(np.int32)


def traffic(data):
    """(minimum bytes moved through device memory, operations): read every byte once, write 1 KB."""
    return data.size * data.itemsize + BINS * 4, 0


@cuda.jit
def zero_bins_kernel(hist):
    """hist[:] = 0 (the versions accumulate into it with atomics)."""
    b = cuda.grid(1)
    if b < hist.size:
        hist[b] = 0


@cuda.jit
def hist_naive_kernel(data, hist):
    """One thread per byte i = cuda.grid(1), guard i < data.size: atomically add 1 to hist[data[i]]
    (cuda.atomic.add on the global bins, which the host zeroed)."""
    # EXERCISE: one global atomic per byte, guarded
    i = cuda.grid(1)
    if i < data.size:
        cuda.atomic.add(hist, data[i], 1)  # a read-modify-write at the L2, on one of only 256 words


@cuda.jit
def hist_privatized_kernel(data, hist):
    """Blocks of THREADS = BINS = 256 threads, one byte per thread (i = cuda.grid(1), i < data.size).

    1. bins = cuda.shared.array(BINS, int32): the block's own histogram; thread t zeroes bins[t].
    2. cuda.syncthreads(): no thread may count into a bin before it is zeroed.
    3. cuda.atomic.add(bins, data[i], 1): contention between equal bytes stays in shared memory.
    4. cuda.syncthreads(): every count of the block is in before the merge reads it.
    5. Merge: thread t adds bins[t] to hist[t] with one global atomic (skip it when bins[t] is 0).
    """
    # EXERCISE: zero the block's shared bins, barrier, count with shared atomics, barrier, merge bin t
    bins = cuda.shared.array(BINS, int32)  # (BINS,) this block's counts
    t = cuda.threadIdx.x
    bins[t] = 0  # shared memory starts with garbage
    cuda.syncthreads()  # the zeroing must land before any thread counts into another thread's bin
    i = cuda.grid(1)
    if i < data.size:
        cuda.atomic.add(bins, data[i], 1)
    cuda.syncthreads()  # all 256 bytes of the block counted before the merge reads the bins
    mine = bins[t]
    if mine > 0:  # an empty bin would spend an L2 round trip adding zero
        cuda.atomic.add(hist, t, mine)


@cuda.jit(device=True)
def count_word(bins, w, slot):
    """Count the 4 bytes of the uint32 word w into the replicated bins: byte b goes to shared word
    COPIES * b + slot (slot = the thread's lane), with cuda.atomic.add."""
    # EXERCISE: shift and mask out each of the 4 bytes: one shared atomic per byte
    for k in range(4):  # 32-bit shifts and masks: one instruction each
        cuda.atomic.add(bins, ((w >> uint32(8 * k)) & uint32(0xFF)) * uint32(COPIES) + slot, 1)


@cuda.jit
def hist_coarsened_kernel(data, words, head, hist):
    """Blocks of OPT_THREADS = 512 threads, a grid sized to the GPU; data (n,) uint8 is also seen as
    words (4 nv,) uint32 = data[head : head + 16 nv] (head < 16 bytes before the first 16-byte-aligned
    address): nv chunks of 16 bytes, chunk i = words[4 i : 4 i + 4].

    1. bins = cuda.shared.array(SLOTS, int32), SLOTS = BINS * COPIES: COPIES = 32 copies of every bin,
       bin b's copy for lane l at word COPIES * b + l, so a warp's 32 atomics hit 32 banks and 32
       addresses whatever the bytes are. Zero all 8192 words (a block-strided loop),
       cuda.syncthreads().
    2. Thread g = cuda.grid(1) counts data[g] if g < head and data[tail + g] if tail + g < n
       (tail = head + 16 nv): the bytes outside whole chunks.
    3. A grid-stride loop over the chunks with uint64 indices, LOADS chunks a trip (i, i + stride,
       ...): wide.load4 all of them first (LOADS x 16 bytes in flight), then count_word(bins, w, lane)
       on each of their words; then single chunks while i < nv.
    4. cuda.syncthreads(), then thread t < BINS sums bin t's 32 copies (copy (c + t) % 32 at step c,
       so the lanes of a warp read 32 different banks) and adds the sum to hist[t] with one global
       atomic (skip it when 0).
    """
    # EXERCISE: zero the replicated bins, barrier, count the edge bytes and the 16-byte chunks, barrier, merge
    bins = cuda.shared.array(SLOTS, int32)  # (BINS, COPIES) flattened: copy l of bin b at 32 b + l
    t = cuda.threadIdx.x
    for k in range(t, SLOTS, OPT_THREADS):
        bins[k] = 0
    cuda.syncthreads()  # the zeroing of every copy lands before any lane counts into it

    lane = uint32(t & 31)
    n = data.size
    g = cuda.grid(1)
    tail = head + words.size * 4
    if g < head:  # the bytes before the first 16-byte-aligned address (a device view at an odd offset)
        cuda.atomic.add(bins, uint32(data[g]) * uint32(COPIES) + lane, 1)
    if g < n - tail:  # the bytes past the last whole chunk
        cuda.atomic.add(bins, uint32(data[tail + g]) * uint32(COPIES) + lane, 1)

    # Unsigned indices: no negative-index fix-up. Each lane reads 16 consecutive bytes, a warp 512:
    # 16 sectors a request, a sixteenth of the requests of byte loads. All LOADS loads of a trip are
    # issued before the first atomic that waits on them.
    nv = uint64(words.size // 4)
    stride = uint64(cuda.gridsize(1))
    i = uint64(g)
    got = cuda.local.array((LOADS, 4), uint32)  # unrolled: registers, not local memory
    while i + uint64(LOADS - 1) * stride < nv:
        for u in range(LOADS):
            v = wide.load4(words, uint64(4) * (i + uint64(u) * stride))
            for j in range(4):
                got[u, j] = v[j]
        for u in range(LOADS):
            for j in range(4):
                count_word(bins, got[u, j], lane)
        i += uint64(LOADS) * stride
    while i < nv:  # fewer than LOADS chunks left for this thread
        v = wide.load4(words, uint64(4) * i)
        for j in range(4):
            count_word(bins, v[j], lane)
        i += stride
    cuda.syncthreads()  # every copy complete before the merge sums them

    if t < BINS:
        total = int32(0)
        for c in range(COPIES):
            total += bins[t * COPIES + ((c + t) & (COPIES - 1))]  # rotated: lanes hit 32 banks
        if total > 0:
            cuda.atomic.add(hist, t, total)  # one global atomic per bin per block


_SIG = "void(uint8[::1], int32[::1])"
KERNELS = {
    "naive": (hist_naive_kernel, _SIG),
    "naive.zero": (zero_bins_kernel, "void(int32[::1])"),
    "privatized": (hist_privatized_kernel, _SIG),
    "optimized": (hist_coarsened_kernel, "void(uint8[::1], uint32[::1], int64, int32[::1])"),
}


def _check(data):
    launch.check_array("data", data, dtype=np.uint8, ndim=1)


def _zeroed_bins():
    hist = launch.empty((BINS,), np.int32)
    zero_bins_kernel[1, BINS](hist)  # a launch, not a host copy: stays on the device's stream
    return hist


def _misaligned_bytes(d) -> int:
    """Bytes before the first 16-byte-aligned address of a device array (the simulator's stand-in
    keeps a NumPy array, whose address it checks wide accesses against)."""
    cai = getattr(d, "__cuda_array_interface__", None)
    address = cai["data"][0] if cai is not None else d.__array_interface__["data"][0]
    return (-address) % CHUNK


def naive(data):
    _check(data)
    (d,) = launch.to_device(data)
    hist = _zeroed_bins()
    hist_naive_kernel[launch.blocks(data.size, THREADS), THREADS](d, hist)
    return launch.result(hist, data)


def privatized(data):
    _check(data)
    (d,) = launch.to_device(data)
    hist = _zeroed_bins()
    hist_privatized_kernel[launch.blocks(data.size, THREADS), THREADS](d, hist)
    return launch.result(hist, data)


def optimized(data):
    _check(data)
    (d,) = launch.to_device(data)
    n = data.size
    head = min(_misaligned_bytes(d), n)  # a 16-byte load must be 16-byte aligned
    nv = (n - head) // CHUNK
    words = d[head:head + nv * CHUNK].view(np.uint32)  # (4 nv,) the same bytes, no copy
    hist = _zeroed_bins()
    grid = launch.grid_stride_blocks(nv, OPT_THREADS, blocks_per_sm=BLOCKS_PER_SM)
    hist_coarsened_kernel[grid, OPT_THREADS](d, words, head, hist)
    return launch.result(hist, data)


def library(data):
    """cupy.bincount, the call a user would make (int64 counts, cast to the day's int32): a benchmark row."""
    import cupy

    return cupy.bincount(cupy.asarray(data), minlength=BINS).astype(cupy.int32)
