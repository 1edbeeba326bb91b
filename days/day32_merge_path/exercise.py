"""Day 32 exercise: merge by co-rank -- two sorted arrays into one, each output placed by a binary search.

out = the stable merge of a (na,) and b (nb,), both sorted float32: on ties a's elements come first.
The co-rank of output k is the i for which the first k outputs are a[:i] and b[:k - i]; it is the one
i in [max(0, k - nb), min(k, na)] with a[i - 1] <= b[k - i] and b[k - i - 1] < a[i] (a bound that
falls off either array holds trivially). It moves by 0 or 1 from k to k + 1, so a binary search
along the anti-diagonal i + j = k of the merge grid ("merge path") finds it in log2(min(na, nb))
steps without looking at any other output.

v1 naive      one thread per output: a co-rank search over both inputs in global memory (two loads a
              step, 26 steps at 2^26), then one compare picks a[i] or b[k - i]. Neighbouring threads
              search neighbouring diagonals, so the loads mostly hit L1/L2, but every output pays ~52
              load instructions for 8 bytes of DRAM traffic: instruction- and latency-bound.
v2 optimized  merge path in tiles of TILE = 256 x 11 = 2816 outputs. A tiny partition kernel runs one
              co-rank search per tile boundary (47 664 searches at 2^27 outputs, not 2^27), so block b
              knows its ranges a[a0:a1] and b[b0:b1] (a1 - a0 + b1 - b0 = TILE). The block stages
              both ranges in shared memory with coalesced loads, one barrier, then each thread does
              its own co-rank search inside the tile (log2(2816) ~ 12 steps, on chip) and merges
              ITEMS = 11 consecutive outputs sequentially, one shared load per output, parks them in
              shared memory (lane t writes word 11 t + q: 11 is odd, so 32 banks), and after a
              second barrier the block stores its tile with coalesced writes.

The inputs must be sorted ascending (not checked: checking would cost a pass over both); NaN has no
place in a sorted float array and is not supported.

Napkin math (na = nb = 2^26, 2^27 outputs): the minimum is each input read once and each output
written once, 8 bytes an output, 1.07 GB, ~0.26 ms at the H200's ~4.2 TB/s copy rate. Naive: 2^27
threads x ~52 dependent loads = 7e9 load instructions (2.3e8 warp requests of up to 32 sectors): far
past the budget, expected a small share of the copy rate. Optimized: per output ~1 staged load, ~1 LDS
and ~8 instructions to merge, 12 x 2 / 11 ~ 2 LDS for the tile search, a park and a store: ~20
instructions against a budget of ~90 per output at the copy rate (132 SMs x 4 schedulers x 32 lanes x
1.98 GHz / (2^27 / 0.26 ms)); the partition kernel adds ~26 dependent L2 round trips once (~20 us).
Bytes in flight: 11 loads of 4 bytes a thread, 8 blocks of 256 an SM (22.5 KB of shared each): ~90 KB
an SM, well over the ~19 KB Little's law asks. Expected: the merge near the copy rate, held back by
the partition launch and the serial phases of a block (stage, search, merge, store) that the other
seven blocks on the SM must cover. cupy has no merge: the library row sorts the concatenation
(CUB radix sort, ~3.5 ms at 38 G keys/s): it sorts rather than merges.

What you write (each raises NotImplementedError with its hint until you do):
  co_rank             the diagonal binary search: <= keeps ties from a first (9 lines)
  merge_naive_kernel  i = co_rank(k, a, b), then the one compare that picks a[i] or b[k - i] (5 lines)
  merge_tiled_kernel  stage a's and b's ranges, barrier, co-rank in the tile, merge ITEMS outputs, barrier, store
                      (55 lines)
Everything else in this file is given. Grade with:  make check DAY=32
"""

import numpy as np

from course import cuda, launch
from numba import float32, int64, uint64  # numba names only after the course import

TITLE = "Merge by co-rank (merge path)"
MEMORY_SPACE = "shared"
VERSIONS = ("naive", "optimized")
# (na, nb): one side empty, a single element, a tile -1 and +1 (2815, 2817 outputs), very unequal
# lengths, primes over two tiles.
TEST_SIZES = ((1, 0), (0, 3), (1, 1), (0, 0), (1000, 1815), (1409, 1408), (1, 3001), (3001, 1), (2003, 3001))
BENCH_SIZES = ((1 << 26, 1 << 26),)  # 268 MB each in, 537 MB out: 2^27 outputs, eighteen times the L2
BOUND = "memory"

THREADS = 256  # naive; the partition kernel
MERGE_THREADS = 256
# Odd on purpose: lane t parks its outputs at shared word ITEMS * t + q, and 11 is coprime with the 32
# banks, so a warp's 32 stores hit 32 banks (8 or 16 would collide 8 or 16 ways). Eleven outputs a
# thread spread the in-tile search (~12 steps) over enough outputs to keep it under 2 LDS each.
ITEMS = 11
TILE = MERGE_THREADS * ITEMS  # 2816 outputs per block: 11 KB staged in, 11 KB parked out


def make_inputs(n, seed: int = 0):
    """n = (na, nb) (an int splits evenly): two sorted float32 arrays over the same range, with
    bursts (stretches where one array is dense and the other sparse) and ties between them."""
    na, nb = (n // 2, n - n // 2) if isinstance(n, int) else n
    rng = np.random.default_rng(seed)

    def sorted_run(m):
        if m == 0:
            return np.empty(0, np.float32)
        # Positive steps whose size changes every 64 elements: the merge path turns irregularly.
        burst = np.repeat(rng.choice(np.array([0.05, 1.0, 20.0], np.float32), -(-m // 64)), 64)[:m]
        x = np.cumsum(rng.random(m, dtype=np.float32) * burst, dtype=np.float64)
        # float64 -> float32 rounding is monotone: still sorted, with some equal neighbours.
        return (x * (100.0 / x[-1]) - 50.0).astype(np.float32)

    return sorted_run(na), sorted_run(nb)


def reference(a, b):
    """The stable merge: a stable sort of the concatenation keeps a's elements before b's equal ones
    (NumPy's stable sort of floats is timsort, which finds the two sorted runs and merges them)."""
    return np.sort(np.concatenate((a, b)), kind="stable")


def traffic(a, b):
    """(minimum bytes moved through device memory, floating-point operations): every input read once,
    every output written once."""
    return 2 * (a.nbytes + b.nbytes), 0


@cuda.jit(device=True)
def co_rank(k, a, b):
    """The co-rank of output k of the stable merge of a and b: how many of the first k outputs come
    from a. Binary search for i in lo = max(0, k - nb) .. hi = min(k, na): while lo < hi, take
    mid = (lo + hi) // 2; if a[mid] <= b[k - 1 - mid] (a's element goes first, ties included) the
    answer is above mid (lo = mid + 1), else hi = mid. Return lo."""
    raise NotImplementedError("Day 32: the diagonal binary search: <= keeps ties from a first (9 lines)")


@cuda.jit
def merge_naive_kernel(a, b, out):
    """One thread per output k = cuda.grid(1), guard k < out.size: i = co_rank(k, a, b), j = k - i;
    out[k] = a[i] if i < na and (j >= nb or a[i] <= b[j]) else b[j] (one store: a store in each
    branch would be two requests a warp)."""
    raise NotImplementedError("Day 32: i = co_rank(k, a, b), then the one compare that picks a[i] or b[k - i] (5 "
                              "lines)")


@cuda.jit
def merge_partition_kernel(a, b, bounds):
    """Thread p = cuda.grid(1) <= tiles writes bounds[p] = co_rank(min(p * TILE, na + nb), a, b): the
    co-ranks of the tile boundaries, one search per block of the merge instead of one per output."""
    p = cuda.grid(1)
    if p < bounds.size:
        bounds[p] = co_rank(min(int64(p) * TILE, int64(a.size + b.size)), a, b)


@cuda.jit
def merge_tiled_kernel(a, b, bounds, out):
    """Block blk (MERGE_THREADS = 256 threads) owns outputs first = blk * TILE .. first + count - 1,
    count = min(TILE, na + nb - first); a0 = bounds[blk], a1 = bounds[blk + 1] (from the partition
    kernel), so its inputs are a[a0:a1] (la of them) and b[first - a0 : first - a0 + count - la].

    1. tile = cuda.shared.array(TILE, float32): slots 0 .. la - 1 hold a's range, slots la .. count - 1
       b's. Thread t loads slots s = t, t + 256, ... (ITEMS of them, s < count), each from a or from b:
       consecutive threads load consecutive floats. Then cuda.syncthreads().
    2. Thread t's first output is d = min(t * ITEMS, count): its co-rank i inside the tile by the
       same diagonal search on tile (a's slot mid against b's slot la + d - 1 - mid, <= for ties).
    3. Merge ITEMS outputs sequentially from i (into a's part) and la + d - i (into b's part), keeping
       the two candidate values in registers (one shared load per output); write output d + q to
       merged = cuda.shared.array(TILE, float32) at slot d + q, for d + q < count.
    4. cuda.syncthreads(), then out[first + s] = merged[s] for s = t, t + 256, ...: coalesced stores.
       A full tile (count == TILE, every block but perhaps the last) needs no guards: take that path
       with uint64 indices.

    The grader checks the idea (the tile staged in shared memory behind a barrier, no local memory,
    coalesced global traffic), not this exact scheme.
    """
    raise NotImplementedError("Day 32: stage a's and b's ranges, barrier, co-rank in the tile, merge ITEMS outputs, "
                              "barrier, store (55 lines)")


_SIG = "void(float32[::1], float32[::1], float32[::1])"
KERNELS = {
    "naive": (merge_naive_kernel, _SIG),
    "optimized.partition": (merge_partition_kernel, "void(float32[::1], float32[::1], int64[::1])"),
    "optimized": (merge_tiled_kernel, "void(float32[::1], float32[::1], int64[::1], float32[::1])"),
}


def _check(a, b):
    """Both float32 and 1-D (either may be empty). Sortedness is the caller's promise, not checked."""
    launch.check_array("a", a, dtype=np.float32, ndim=1)
    launch.check_array("b", b, dtype=np.float32, ndim=1)


def naive(a, b):
    _check(a, b)
    n = a.shape[0] + b.shape[0]
    d_a, d_b = launch.to_device(a, b)
    out = launch.empty((n,), np.float32)
    if n:
        merge_naive_kernel[launch.blocks(n, THREADS), THREADS](d_a, d_b, out)
    return launch.result(out, a, b)


def optimized(a, b):
    _check(a, b)
    n = a.shape[0] + b.shape[0]
    d_a, d_b = launch.to_device(a, b)
    out = launch.empty((n,), np.float32)
    if n:
        tiles = launch.blocks(n, TILE)
        bounds = cuda.device_array(tiles + 1, dtype=np.int64)  # co-rank of each tile's first output, and n's
        merge_partition_kernel[launch.blocks(tiles + 1, THREADS), THREADS](d_a, d_b, bounds)
        merge_tiled_kernel[tiles, MERGE_THREADS](d_a, d_b, bounds, out)
    return launch.result(out, a, b)


def library(a, b):
    """CuPy has no merge: a user sorts the concatenation (CUB radix sort), which sorts rather than
    merges, so it does log-many passes over data that was already two sorted runs (a benchmark row)."""
    import cupy

    return cupy.sort(cupy.concatenate((cupy.asarray(a), cupy.asarray(b))))
