"""Day 28 exercise: scan II -- Brent-Kung, out[i] = x[0] + x[1] + ... + x[i], work-efficient and conflict-free.

The inclusive prefix sum of x (float32 or int32, int32 wrapping as the hardware adds). Each block
scans a segment of SPAN = 1024 elements in shared memory and writes the segment's total; the totals
are scanned the same way (recursively, until one block holds them all) and added back to every
block after the first. That three-step scheme (block scans, scan of block sums, add back) is shared
by both versions; they differ in the block scan.

v1 naive      Kogge-Stone: one element a thread, 1024 threads; at step d = 1, 2, 4, ..., 512 every
              thread t >= d adds the value d to its left. log2(1024) = 10 steps of up to 1024 adds:
              ~9.2 k adds per 1024 elements (n log n). Double-buffered (read one buffer, write the
              other) so that a step never reads a word another thread of the same step overwrites.
v2 optimized  Brent-Kung, work-efficient: two elements a thread, 512 threads. An up-sweep (a
              reduction tree: at stride s the thread owning word 2s(t+1)-1 adds word 2s(t+1)-1-s)
              leaves the total in the last word; a down-sweep over the same pairs (Blelloch's: the
              left word takes the right one's prefix, the right one adds the left's sum) turns the
              tree into the exclusive scan, and each thread adds its own two elements. ~2 * 1024 adds
              per 1024 elements over 22 barriers. The tree's strided words would meet in a few banks
              (lanes 2s words apart: up to 32-way conflicts); the shared index is padded, word i
              stored at i + i // 32, which spreads every level over 32 banks.
Napkin math: 4 bytes read and 4 written per element, one add: 2^28 elements move 2.1 GB at the
minimum, ~0.51 ms at the H200's ~4.2 TB/s copy rate. The three-step scheme reads x, writes out,
then reads and writes out again to add the block sums: 16 bytes an element, so ~1.0 ms is its floor
(half the copy rate); day 29's single pass removes the second trip. Inside a block: Kogge-Stone
issues 10 loads of its own word, ~10 of its neighbour's and 10 stores a thread over 11 barriers for
one element: the simulator counts ~980 warp requests of shared memory per 1024-element block;
Brent-Kung's two sweeps halve, then double, the active threads: ~375 requests per block over 22
barriers, each one wavefront with the padding (1.03 over the kernel in the simulator, 3.5 without).
With two 1024-thread blocks (Kogge-Stone) or four 512-thread blocks (Brent-Kung) resident per SM, one
block's barriers overlap the others' memory traffic, so DRAM (the add-back's second trip included)
should set both times; Brent-Kung leaves the shared pipe and the issue slots freer. H200 times: to be
measured.

What you write (each raises NotImplementedError with its hint until you do):
  kogge_stone_kernel  load into buf[0], barrier; each step d: add the value d back into the other buffer, barrier,
                      swap (20 lines)
  padded              element i plus one word for every 32 before it (1 line)
  brent_kung_kernel   load two elements; up-sweep, total, down-sweep (a barrier before each level); add own, store
                      (35 lines)
Everything else in this file is given. Grade with:  make check DAY=28
"""

import numpy as np

from course import cuda, launch

TITLE = "Scan II: Brent-Kung, work-efficient and conflict-free"
MEMORY_SPACE = "shared"
VERSIONS = ("naive", "optimized")
SPAN = 1024  # elements one block scans (both versions)
# float32 sizes: one element, a block -1 and +1, a prime over three blocks and a ragged fourth (each
# block after the first adds the totals before it). int32 sizes are the grader's (n, "int32").
TEST_SIZES = (1, 1023, 1025, 3079)
BENCH_SIZES = (1 << 28, (1 << 28, "int32"))  # 1 GiB in, 1 GiB out: seventeen times the 60 MB L2
BOUND = "memory"
RTOL = 1e-5  # float32: within 1e-5 of the running sum (inputs of mean 1: the sum ~ the sum of |x|)

KS_THREADS = SPAN  # Kogge-Stone: one element a thread
BK_THREADS = SPAN // 2  # Brent-Kung: two elements a thread
PADDED = SPAN + SPAN // 32  # one spare word per 32: the padded index of word SPAN - 1 is 1054
ADD_THREADS = 256  # the add-back: four elements a thread, SPAN per block


def make_inputs(n, seed: int = 0):
    """n: an int (float32 of mean 1) or (n, "int32") (uniform over all of int32: the sums wrap)."""
    n, dtype = (n, "float32") if isinstance(n, int) else n
    rng = np.random.default_rng(seed)
    if np.dtype(dtype) == np.int32:
        return (rng.integers(-(2**31), 2**31, size=n, dtype=np.int32),)
    # Mean 1: every prefix grows like its length, so the relative tolerance on each output is one on
    # the running sum of |x| too, and a lost or doubled element shows.
    return (rng.standard_normal(n, dtype=np.float32) + np.float32(1.0),)


def reference(x):
    if x.dtype == np.int32:
        return np.cumsum(x, dtype=np.int32)  # NumPy's integer adds wrap, as the GPU's do
    return np.cumsum(x.astype(np.float64)).astype(np.float32)


def traffic(x):
    """(minimum bytes moved through device memory, operations): read x once, write out once, n adds."""
    return 2 * x.size * x.itemsize, x.size


@cuda.jit
def kogge_stone_kernel(x, out, sums):  # x (n,), out (n,), sums (blocks,)
    """Block b scans x[b * SPAN .. b * SPAN + SPAN - 1] into out (inclusive) and writes its total to
    sums[b]. KS_THREADS = SPAN threads, one element each.

    buf = cuda.shared.array((2, SPAN), x.dtype): thread t loads x[b * SPAN + t] into buf[0, t] (0 past
    the end of x), barrier. Then for d = 1, 2, 4, ..., SPAN // 2, reading buffer src and writing the
    other one: buf[dst, t] = buf[src, t] + buf[src, t - d] if t >= d else buf[src, t]; a barrier after
    each step, then swap src and dst. With one buffer, thread t would read word t - d while thread
    t - d overwrites it in the same step. Finally out[b * SPAN + t] = buf[src, t] (guarded by n) and
    thread SPAN - 1 writes buf[src, SPAN - 1] to sums[b].
    """
    raise NotImplementedError("Day 28: load into buf[0], barrier; each step d: add the value d back into the other "
                              "buffer, barrier, swap (20 lines)")


@cuda.jit(device=True)
def padded(i):
    """The shared word that holds element i of the segment: i + i // 32 (one spare word after every
    32), so lanes whose elements are a multiple of 32 apart land in different banks."""
    raise NotImplementedError("Day 28: element i plus one word for every 32 before it (1 line)")


@cuda.jit
def brent_kung_kernel(x, out, sums):  # x (n,), out (n,), sums (blocks,)
    """Block b scans x[b * SPAN .. b * SPAN + SPAN - 1] into out (inclusive) and writes its total to
    sums[b]. BK_THREADS = SPAN // 2 threads, two elements each; sm = cuda.shared.array(PADDED, x.dtype)
    and element i lives in sm[padded(i)].

    1. Thread t loads elements t and t + BK_THREADS (0 past the end of x): coalesced loads; it
       keeps both values (a, b) in registers.
    2. Up-sweep, s = 1, 2, 4, ..., SPAN // 2: barrier, then k = 2 * s * (t + 1) - 1; if k < SPAN:
       element k += element k - s. Element SPAN - 1 ends as the block's total.
    3. Barrier; thread BK_THREADS - 1 writes element SPAN - 1 to sums[b] and sets it to 0.
    4. Down-sweep, s = SPAN // 2, ..., 2, 1: barrier, then the same k; if k < SPAN: element k - s
       takes element k's value and element k becomes the sum of both (the old k - s added to it).
       This leaves the exclusive scan (the sum of the elements before each one).
    5. Barrier, then out[t] = element t + a and out[t + BK_THREADS] = element t + BK_THREADS + b
       (the inclusive scan; offsets from b * SPAN, guarded by n).
    Both sweeps use the same pairs (k - s, k): a warp's words lie inside one window of 64s words.
    Every step needs its barrier: a step reads words the previous step wrote in other warps.
    """
    raise NotImplementedError("Day 28: load two elements; up-sweep, total, down-sweep (a barrier before each level); "
                              "add own, store (35 lines)")


@cuda.jit
def add_block_sums_kernel(out, scanned):  # out (n,), scanned (blocks,): the inclusive scan of the sums
    """Block c of the grid adds scanned[c] (the total of segments 0 .. c) to every element of segment
    c + 1: out[(c + 1) * SPAN + j] for j < SPAN and inside out. ADD_THREADS threads, each taking
    j = t, t + ADD_THREADS, ... so each warp's loads and stores are coalesced."""
    c = cuda.blockIdx.x
    carry = scanned[c]  # one word for the block: every lane reads it, served once from L1
    base = (c + 1) * SPAN
    n = out.size
    for p in range(SPAN // ADD_THREADS):
        i = base + p * ADD_THREADS + cuda.threadIdx.x
        if i < n:
            out[i] += carry


_SIGS = {np.dtype(np.float32): "void(float32[::1], float32[::1], float32[::1])",
         np.dtype(np.int32): "void(int32[::1], int32[::1], int32[::1])"}
_ADD_SIG = "void(float32[::1], float32[::1])"
KERNELS = {
    "naive": (kogge_stone_kernel, _SIGS[np.dtype(np.float32)]),
    "naive.add": (add_block_sums_kernel, _ADD_SIG),
    "optimized": (brent_kung_kernel, _SIGS[np.dtype(np.float32)]),
    "optimized.int32": (brent_kung_kernel, _SIGS[np.dtype(np.int32)]),
    "optimized.add": (add_block_sums_kernel, _ADD_SIG),
    # The benchmark scans int32.
    "naive.int32": (kogge_stone_kernel, _SIGS[np.dtype(np.int32)]),
    "add.int32": (add_block_sums_kernel, "void(int32[::1], int32[::1])"),
}


def _check(x):
    launch.check_array("x", x, dtype=(np.float32, np.int32), ndim=1)
    if x.size == 0:
        raise ValueError(f"x: expected at least one element, got shape {tuple(x.shape)}")


def _scan(d_x, block_kernel, threads):
    """Block scans, the scan of the block totals (this same function), then the add-back."""
    n = d_x.size
    blocks = launch.blocks(n, SPAN)
    out = launch.empty((n,), d_x.dtype)
    sums = launch.empty((blocks,), d_x.dtype)
    block_kernel[blocks, threads](d_x, out, sums)
    if blocks > 1:
        scanned = _scan(sums, block_kernel, threads)  # SPAN times fewer elements each level down
        add_block_sums_kernel[blocks - 1, ADD_THREADS](out, scanned)
    return out


def naive(x):
    _check(x)
    (d_x,) = launch.to_device(x)
    return launch.result(_scan(d_x, kogge_stone_kernel, KS_THREADS), x)


def optimized(x):
    _check(x)
    (d_x,) = launch.to_device(x)
    return launch.result(_scan(d_x, brent_kung_kernel, BK_THREADS), x)


def library(x):
    """CuPy's cumsum (CUB's single-pass device scan underneath): a benchmark row."""
    import cupy

    return cupy.cumsum(cupy.asarray(x), dtype=x.dtype)
