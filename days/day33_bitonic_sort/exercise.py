"""Day 33 exercise: bitonic sort -- float32 keys of any length sorted ascending, step by step in global memory,
then tile by tile in shared memory.

The keys are padded with +inf to the next power of two P (at least 2), sorted by Batcher's bitonic
network and the first n kept: the pad is at least every key, so the first n places of the sorted
padded array are exactly the sorted keys, real +inf keys included (the pad is dropped by position,
never by value). The network has log2(P) stages; stage k (k = 2, 4, ..., P: the sorted runs grow to
length k) has steps j = k/2, k/4, ..., 1, and step j compare-exchanges every key i (with bit j clear)
with key i + j: the smaller one goes first if i lies in an ascending run of the stage ((i & k) == 0),
last if it lies in a descending one. Sorted runs of length k/2 that alternate ascending and
descending make bitonic sequences of length k, which the stage's steps sort.

v1 naive      the network in global memory: one launch per (stage, step), one thread per
              compare-exchange pair: log2(P)(log2(P)+1)/2 launches (300 at P = 2^24), each reading
              and writing every key once, plus one launch that copies the keys and the +inf pad.
v2 optimized  every step whose partner distance fits in a tile of TILE = 2048 keys done in shared
              memory: one launch sorts each tile completely (stages 2 .. 2048, 66 steps, the pad
              written there as the keys load); each later stage k runs its steps j >= TILE as single
              global launches (the naive kernel) and then one shared-memory launch that does the
              stage's last log2(TILE) = 11 steps on each tile. 256 threads a tile, four pairs each
              a step (eight shared loads in flight), a barrier after every step. At P = 2^24:
              1 + 91 + 13 = 105 launches, and as many passes over the keys, against 300.

Napkin math: each pass over the keys reads and writes every key: 8 bytes a key a pass, 134 MB at
2^24 keys, ~33 us at the H200's ~4.1 TB/s copy rate. Naive: 300 passes, ~40 GB, ~10 ms (less when
the 64 MB of keys sit partly in the 60 MB L2). Optimized: 105 passes, ~14 GB, ~3.4 ms at the copy
rate; the shared-memory steps cost ~2 shared accesses a key a step (66 steps in the tile sort, 11 in
each merge), well under the SMs' shared bandwidth. The minimum any sort moves is 8 bytes a key (read
once, write once): the bench's GB/s is measured against that, so the naive rate is ~1/300 and the
optimized ~1/105 of what the copy rate would allow, whatever the kernels do. cupy.sort (CUB's radix
sort: a few passes over the keys, independent of log n) is the library row. The simulator counts
(n = 4099, P = 8192): naive 91 step launches, 6.8 MB of sectors; optimized 6 launches, 303 KB, 4.0
sectors a request; 1.9 (tile sort) and 1.4 (merge) shared wavefronts a request, the 2-way conflict of
the steps j < 32. Measured on the H200 at 2^24: naive 10.5 ms, optimized 5.06 ms (2.1x),
cupy.sort (CUB radix) 0.51 ms: O(n log^2 n) work loses to a radix sort's O(n) passes.

What you write (each raises NotImplementedError with its hint until you do):
  bitonic_step_kernel        pair p -> lo = 2p - (p & (j - 1)), hi = lo + j; ascending = (lo & k) == 0; swap when
                             out of order (10 lines)
  bitonic_tile_sort_kernel   load the tile (+inf past n), barrier; stages 2 .. span in shared memory, a barrier a
                             step; store (30 lines)
  bitonic_tile_merge_kernel  load the tile, barrier; steps j = TILE / 2 .. 1 in shared memory, a barrier a step;
                             store (22 lines)
Everything else in this file is given. Grade with:  make check DAY=33
"""

import numpy as np

from course import cuda, launch
from numba import float32  # numba names only after the course import

TITLE = "Bitonic sort: global steps, shared-memory tiles"
MEMORY_SPACE = "shared"
VERSIONS = ("naive", "optimized")
# One key; a pair; a power of two -1, itself, +1 (P = 256, 256, 512); a prime. NAIVE_SIZES stay
# small: the naive network launches P/2 threads log2(P)(log2(P)+1)/2 times.
NAIVE_SIZES = (1, 2, 3, 255, 256, 257, 509, 1021)
# The optimized version: one key, a part-tile (P = 4, 1024), a tile and a tile +1 (P = 4096: one
# global step and a merge), a prime over four tiles (P = 8192: three global steps, two merges).
TEST_SIZES = (1, 3, 1021, 2048, 2049, 4099)
BENCH_SIZES = (1 << 24,)  # 64 MB of keys, near the 60 MB L2: every pass of the naive network re-reads them
BOUND = "memory"
RTOL = 0.0  # a sort moves keys, it computes nothing: every value exactly where np.sort puts it

STEP_THREADS = 256  # naive steps and the pad: threads per block, one pair (or key) each
TILE = 2048  # keys a block sorts in shared memory: 8 KB
TILE_THREADS = 256  # threads per tile block: eight blocks (64 KB of tiles) fill an SM's 2048 threads
PAIRS = TILE // 2 // TILE_THREADS  # 4 compare-exchange pairs a thread a step
INF = np.float32(np.inf)  # the pad: sorts after every key


def make_inputs(n: int, seed: int = 0):
    """n float32 keys: normal values with repeats, and a few +-0.0 and +-inf mixed in."""
    rng = np.random.default_rng(seed)
    keys = rng.standard_normal(n).astype(np.float32)
    keys[rng.random(n) < 0.1] = keys[0]  # one value repeated: equal keys meet in many pairs
    specials = np.array([0.0, -0.0, np.inf, -np.inf], dtype=np.float32)
    pick = rng.random(n) < 0.02
    keys[pick] = rng.choice(specials, size=int(pick.sum()))
    return (keys,)


def reference(keys):
    return np.sort(keys)  # plain NumPy: ascending, -0.0 == 0.0 in either order


def traffic(keys):
    """(minimum bytes moved through device memory, operations): read every key once, write it once.
    No floating-point arithmetic: compares only."""
    return 2 * keys.nbytes, 0


def padded_length(n: int) -> int:
    """The power of two the keys are padded to: the smallest >= n, and at least 2 (one pair)."""
    return max(2, 1 << (n - 1).bit_length())


@cuda.jit
def pad_kernel(keys, buf):  # keys (n,), buf (P,)
    """buf[i] = keys[i] for i < n, +inf for n <= i < P: one thread a slot."""
    i = cuda.grid(1)
    if i < buf.size:
        buf[i] = keys[i] if i < keys.size else INF


@cuda.jit
def bitonic_step_kernel(buf, j, k):  # buf (P,), P a power of two; j the partner distance, k the stage
    """One step (j) of stage k over all of buf, one thread per compare-exchange pair: pair p =
    cuda.grid(1) (guard p < P // 2) owns keys lo and hi = lo + j, where lo is p with a zero bit
    inserted at bit j: lo = 2p - (p & (j - 1)). The pair is put in ascending order if lo lies in an
    ascending run of the stage, (lo & k) == 0, and in descending order otherwise: swap when
    (buf[lo] > buf[hi]) equals that test."""
    raise NotImplementedError("Day 33: pair p -> lo = 2p - (p & (j - 1)), hi = lo + j; ascending = (lo & k) == 0; swap "
                              "when out of order (10 lines)")


@cuda.jit
def bitonic_tile_sort_kernel(keys, buf, span):  # keys (n,), buf (P,); P // span blocks of TILE_THREADS
    """Block b sorts the span = min(P, TILE) keys from base = b * span, in the direction stage `span`
    of the whole network wants (ascending when (base & span) == 0, so neighbouring tiles alternate).

    1. tile = cuda.shared.array(TILE, float32). Thread t loads slots s = t, t + TILE_THREADS, ...
       (2 * PAIRS of them, s < span): tile[s] = keys[base + s], or +inf where base + s >= n (the
       pad). Consecutive threads, consecutive keys: coalesced. Barrier.
    2. For each stage k = 2, 4, ..., span and each step j = k / 2, ..., 1: thread t takes the pairs
       p = t, t + TILE_THREADS, ... (PAIRS of them, p < span / 2); pair p is lo = 2p - (p & (j - 1))
       and hi = lo + j (tile slots), ascending when ((base + lo) & k) == 0 (the global index: at
       k = span the direction depends on the block); swap when out of order. A barrier after every
       step: the next step's pairs mix keys that other warps wrote in this one.
    3. Store the same slots back to buf[base + s]: coalesced.
    """
    raise NotImplementedError("Day 33: load the tile (+inf past n), barrier; stages 2 .. span in shared memory, a "
                              "barrier a step; store (30 lines)")


@cuda.jit
def bitonic_tile_merge_kernel(buf, k):  # buf (P,); P // TILE blocks of TILE_THREADS threads; k > TILE
    """The last log2(TILE) steps of stage k (j = TILE / 2, ..., 1) on block b's tile of TILE keys from
    base = b * TILE: the stage's global steps have already left every tile a bitonic sequence that
    holds exactly its share of the keys, so these steps finish it in shared memory.

    Load the tile's slots s = t, t + TILE_THREADS, ... (2 * PAIRS of them) into a shared tile,
    barrier; for each step j the pairs p = t, t + TILE_THREADS, ... (PAIRS of them), lo = 2p -
    (p & (j - 1)), hi = lo + j, swapped when out of order, one direction for the whole tile:
    ascending when (base & k) == 0 (a tile is shorter than a run of stage k); a barrier after every
    step; store the tile back, coalesced.
    """
    raise NotImplementedError("Day 33: load the tile, barrier; steps j = TILE / 2 .. 1 in shared memory, a barrier a "
                              "step; store (22 lines)")


KERNELS = {
    "naive": (bitonic_step_kernel, "void(float32[::1], int64, int64)"),
    "naive.pad": (pad_kernel, "void(float32[::1], float32[::1])"),
    "optimized": (bitonic_tile_sort_kernel, "void(float32[::1], float32[::1], int64)"),
    "optimized.merge": (bitonic_tile_merge_kernel, "void(float32[::1], int64)"),
    "optimized.step": (bitonic_step_kernel, "void(float32[::1], int64, int64)"),
}


def _check(keys):
    launch.check_array("keys", keys, dtype=np.float32, ndim=1)
    if keys.size == 0:
        raise ValueError(f"keys: expected at least one key, got shape {tuple(keys.shape)}")


def naive(keys):
    _check(keys)
    (d_keys,) = launch.to_device(keys)
    n = keys.size
    size = padded_length(n)
    buf = launch.empty((size,), np.float32)  # (P,) the keys and their +inf pad
    pad_kernel[launch.blocks(size, STEP_THREADS), STEP_THREADS](d_keys, buf)
    pairs = launch.blocks(size // 2, STEP_THREADS)
    k = 2
    while k <= size:  # log2(P) stages ...
        j = k // 2
        while j > 0:  # ... of log2(k) steps, one launch each: the launch boundary is the grid's barrier
            bitonic_step_kernel[pairs, STEP_THREADS](buf, j, k)
            j //= 2
        k *= 2
    return launch.result(buf[:n], keys)  # the pad dropped by position: the first n slots


def optimized(keys):
    _check(keys)
    (d_keys,) = launch.to_device(keys)
    n = keys.size
    size = padded_length(n)
    buf = launch.empty((size,), np.float32)  # (P,) the keys and their +inf pad
    span = min(size, TILE)
    bitonic_tile_sort_kernel[size // span, TILE_THREADS](d_keys, buf, span)  # stages 2 .. span, pad included
    pairs = launch.blocks(size // 2, STEP_THREADS)
    k = 2 * TILE
    while k <= size:  # the stages longer than a tile
        j = k // 2
        while j >= TILE:  # partners in different tiles: a global step, a launch each
            bitonic_step_kernel[pairs, STEP_THREADS](buf, j, k)
            j //= 2
        bitonic_tile_merge_kernel[size // TILE, TILE_THREADS](buf, k)  # the stage's last 11 steps
        k *= 2
    return launch.result(buf[:n], keys)  # the pad dropped by position: the first n slots


def library(keys):
    """CuPy's sort (CUB's device radix sort for float32): a benchmark row."""
    import cupy

    return cupy.sort(cupy.asarray(keys))
