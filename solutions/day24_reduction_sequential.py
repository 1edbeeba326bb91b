"""Day 24: reduction II -- sequential addressing, out[0] = sum_i x[i], conflict-free in shared memory.

The whole reduction of day 23 (block partial sums, the same kernel over the partials until one value
is left: day 23's reduce_blocks), with the tree turned round and then the load put to work.
Harris's "Optimizing parallel reduction in CUDA", kernels 3 and 4.

v1 naive      sequential addressing: the loop runs s = THREADS / 2, ..., 2, 1 and the threads t < s
              add sm[t + s] into sm[t]. Live threads are packed (no warp splits until fewer than 32
              are left) AND a warp touches 32 consecutive words (32 banks): one wavefront a request.
v2 optimized  first add during the load: a block takes 2 * THREADS elements, thread t adds
              x[base + t] and x[base + THREADS + t] (both coalesced, both loads in flight before the
              add) and stores the pair's sum; the tree is v1's. Half the blocks, so half the trees,
              barriers and shared-memory passes for the same n; in v1 half the threads did nothing
              after their load but wait at the first barrier.

Napkin math: 4 bytes read and one add per element; 2^28 floats are 1 GiB, ~0.25 ms at the H200's
~4.2 TB/s copy rate. Counted in the simulator, a block's tree and load take 45 shared requests of
one wavefront each (day 23: 149 wavefronts). v1: 2^20 blocks x 45 wavefronts over 132 SMs is ~0.36 M
clocks, ~0.18 ms at 1.98 GHz, under the DRAM time: the shared pipe no longer binds, the barriers'
latency and the one load a thread in flight do. v2 halves the trees per element (23 wavefronts per
256 elements) and keeps two loads a thread in flight: it should come closest to the copy rate of the
four versions so far. Days 25 and 26 take the tree's last warp off the barriers and stride over the
grid.
"""

from course import cuda
from numba import float32, uint64  # numba names only after the course import
from solutions.day23_reduction_interleaved import THREADS, reduce_blocks
from solutions.day23_reduction_interleaved import (  # noqa: F401  (the days' problem: the graders read these)
    RTOL,
    make_inputs,
    reference,
    traffic,
)

TITLE = "Reduction II: sequential addressing"
MEMORY_SPACE = "shared"
VERSIONS = ("naive", "optimized")
# One element; a block -1 and +1; the optimized version's block (2 * THREADS) -1 and +1; primes
# (the largest: 17 or 9 blocks, then a second pass over their partials).
TEST_SIZES = (1, 255, 257, 511, 513, 1021, 4099)
BENCH_SIZES = (1 << 28,)  # 1 GiB: seventeen times the 60 MB L2
BOUND = "memory"
PAIR = 2 * THREADS  # elements one block of the optimized version takes


@cuda.jit
def reduce_sequential_kernel(x, partial):  # x (n,), partial (blocks,)
    """Block b sums x[b * THREADS .. b * THREADS + THREADS - 1] into partial[b].

    sm = cuda.shared.array(THREADS, float32); thread t stores x[b * THREADS + t] in sm[t] (0.0 past
    the end of x), then cuda.syncthreads(). Then for s = THREADS // 2, ..., 2, 1 (halving): the
    threads t < s add sm[t + s] into sm[t], and every thread calls cuda.syncthreads() after the
    step (outside the if). Thread 0 writes sm[0] to partial[b]. A warp's lanes then read and write
    consecutive words: no two lanes in one bank.
    """
    # EXERCISE: load, barrier; s = THREADS // 2 .. 1: if t < s: sm[t] += sm[t + s]; barrier; thread 0 stores
    sm = cuda.shared.array(THREADS, float32)
    t = cuda.threadIdx.x
    i = uint64(cuda.blockIdx.x) * uint64(THREADS) + uint64(t)  # unsigned: no wrap-around fix-up
    sm[t] = x[i] if i < uint64(x.size) else float32(0.0)
    cuda.syncthreads()
    s = THREADS // 2
    while s > 0:
        # Threads 0 .. s-1 work: whole warps work or rest, and lane l of a warp touches words
        # w + l and w + l + s, 32 consecutive words each: 32 banks, one wavefront.
        if t < s:
            sm[t] += sm[t + s]
        cuda.syncthreads()  # the next step reads sums other threads wrote in this one
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sm[0]


@cuda.jit
def reduce_first_add_kernel(x, partial):  # x (n,), partial (blocks,)
    """Block b sums the 2 * THREADS elements from base = b * 2 * THREADS into partial[b].

    Thread t loads x[base + t] and x[base + THREADS + t], each 0.0 past the end of x (guard each
    index on its own: the second half of the last block may run past n while the first does not),
    and stores their sum in sm[t]; then the tree of reduce_sequential_kernel (a barrier first and
    after every step) and thread 0 writes partial[b].
    """
    # EXERCISE: two guarded loads a thread, THREADS apart; store their sum; then the sequential tree
    sm = cuda.shared.array(THREADS, float32)
    t = cuda.threadIdx.x
    n = uint64(x.size)
    i = uint64(cuda.blockIdx.x) * uint64(PAIR) + uint64(t)
    j = i + uint64(THREADS)
    # Both loads issue before either is needed: two loads in flight a thread, each warp-wide load
    # 128 consecutive bytes (coalesced).
    a = x[i] if i < n else float32(0.0)
    b = x[j] if j < n else float32(0.0)
    sm[t] = a + b
    cuda.syncthreads()
    s = THREADS // 2
    while s > 0:
        if t < s:
            sm[t] += sm[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sm[0]


_SIG = "void(float32[::1], float32[::1])"
KERNELS = {"naive": (reduce_sequential_kernel, _SIG), "optimized": (reduce_first_add_kernel, _SIG)}


def naive(x):
    return reduce_blocks(reduce_sequential_kernel, x, THREADS)


def optimized(x):
    return reduce_blocks(reduce_first_add_kernel, x, PAIR)


def library(x):
    """CuPy's sum (CUB's device reduction): a row of the benchmark table."""
    import cupy

    return cupy.sum(cupy.asarray(x)).reshape(1)
