"""Day 23: reduction I -- interleaved addressing, out[0] = sum_i x[i], a tree in shared memory.

Both versions are whole reductions: each block of THREADS threads loads THREADS consecutive floats
into shared memory and folds them into one partial sum (a tree of log2(256) = 8 steps, a barrier
after each); the same kernel then runs over the partials, and again, until one value is left
(n = 2^28: 2^20 partials, then 4096, 16, 1). Harris's "Optimizing parallel reduction in CUDA",
kernels 1 and 2; days 24-26 carry on from here.

v1 naive      interleaved addressing, divergent: at step s (1, 2, 4, ..., 128) the threads with
              t % (2s) == 0 add sm[t + s] into sm[t]. Active lanes are spread over every warp (half
              of each warp at s = 1, one lane in eight at s = 4), so each step issues its shared
              loads, stores and the modulo from all 8 warps while most lanes idle.
v2 optimized  strided index: thread t works on index = 2 * s * t, so the active threads are the first
              THREADS / (2s), packed into as few warps as possible (no divergence inside a warp until
              fewer than 32 remain). The price: lane t touches word 2st, a stride of 2s words, and
              lanes pile into the same bank: 2-way conflicts at s = 1, 4-way at s = 2, 8-way at s >= 4.

Napkin math: 4 bytes read and one add per element: memory-bound at best. 2^28 floats are 1 GiB,
~0.25 ms at the H200's ~4.2 TB/s copy rate. A block folds 256 elements with 9 barriers; counted in the
simulator, v1 issues 149 shared-memory requests a block (each one wavefront: conflict-free, but most
lanes idle) and v2 44 requests, which take 149 wavefronts (3.4 a request): the divergence is gone,
but the bank conflicts give the shared-memory pipe back the same passes. At one wavefront a clock per
SM, 2^20 blocks x 149 wavefronts over 132 SMs is ~1.2 M clocks, ~0.6 ms at 1.98 GHz: both versions
are bound by the tree, not by DRAM; v2 saves the idle warps' instructions (~3x fewer shared
instructions, no modulo) and should be faster. Day 24 removes the conflicts.

The host side (validation, the launches over the partials, the (1,) result) is reduce_blocks below;
days 24-26 import it.
"""

import numpy as np

from course import cuda, launch
from numba import float32, uint64  # numba names only after the course import

TITLE = "Reduction I: interleaved addressing"
MEMORY_SPACE = "shared"
VERSIONS = ("naive", "optimized")
# One element; a block -1 and +1; a prime; a prime past 16 blocks (a second pass over 17 partials).
TEST_SIZES = (1, 255, 257, 1021, 4099)
BENCH_SIZES = (1 << 28,)  # 1 GiB: seventeen times the 60 MB L2
BOUND = "memory"
# float32 partial sums in a tree: the error grows with log2(n), ~28 roundings at 2^28, far under 1e-5.
RTOL = 1e-5
THREADS = 256  # a power of two: every tree step halves the live partials exactly


def make_inputs(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    # Mean 1: the sum grows like n and stays far from zero, so the relative tolerance against the
    # sum is a tolerance against sum(|x|) (about 1.17 n) too, and a lost element shows.
    return (rng.standard_normal(n, dtype=np.float32) + np.float32(1.0),)


def reference(x):
    return np.array([x.sum(dtype=np.float64)], dtype=np.float32)


def traffic(x):
    """(minimum bytes moved through device memory, FLOPs): read x once, write one float."""
    return x.size * x.itemsize + 4, x.size


@cuda.jit
def reduce_interleaved_kernel(x, partial):  # x (n,), partial (blocks,)
    """Block b sums x[b * THREADS .. b * THREADS + THREADS - 1] into partial[b].

    sm = cuda.shared.array(THREADS, float32); thread t stores x[b * THREADS + t] in sm[t] (0.0 past
    the end of x), then cuda.syncthreads(). Then for s = 1, 2, 4, ..., THREADS // 2: the threads
    with t % (2 * s) == 0 add sm[t + s] into sm[t], and every thread calls cuda.syncthreads() after
    the step (outside the if: all threads of the block must reach every barrier). Thread 0 writes
    sm[0] to partial[b].
    """
    # EXERCISE: load, barrier; s = 1, 2, ...: if t % (2*s) == 0: sm[t] += sm[t+s]; barrier; thread 0 stores
    sm = cuda.shared.array(THREADS, float32)
    t = cuda.threadIdx.x
    i = uint64(cuda.blockIdx.x) * uint64(THREADS) + uint64(t)  # unsigned: no wrap-around fix-up
    sm[t] = x[i] if i < uint64(x.size) else float32(0.0)  # consecutive threads, consecutive floats
    cuda.syncthreads()
    s = 1
    while s < THREADS:
        # The live threads are scattered: at s = 4 lanes 0, 8, 16, 24 of every warp. All 8 warps
        # issue this step's instructions, most of their lanes switched off.
        if t % (2 * s) == 0:
            sm[t] += sm[t + s]
        cuda.syncthreads()  # the next step reads sums other threads wrote in this one
        s *= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sm[0]


@cuda.jit
def reduce_strided_kernel(x, partial):  # x (n,), partial (blocks,)
    """The same block sums as reduce_interleaved_kernel, the same load, the same barriers; only the
    tree step changes: for s = 1, 2, 4, ..., THREADS // 2, thread t computes index = 2 * s * t and,
    if index < THREADS, adds sm[index + s] into sm[index]. The live threads are now t = 0 ..
    THREADS / (2s) - 1: whole warps work or rest, no warp splits until fewer than 32 are left.
    """
    # EXERCISE: the same load and barriers; the step works on index = 2*s*t while index < THREADS
    sm = cuda.shared.array(THREADS, float32)
    t = cuda.threadIdx.x
    i = uint64(cuda.blockIdx.x) * uint64(THREADS) + uint64(t)
    sm[t] = x[i] if i < uint64(x.size) else float32(0.0)
    cuda.syncthreads()
    s = 1
    while s < THREADS:
        index = 2 * s * t
        # Packed threads, scattered words: lane t touches word 2st, a stride of 2s words, so the
        # lanes of a warp share 16 / s banks: 2-way conflicts at s = 1, 4-way at s = 2, 8-way at
        # s = 4, 8, 16 (then fewer lanes are left: 4-, 2-, 1-way).
        if index < THREADS:
            sm[index] += sm[index + s]
        cuda.syncthreads()
        s *= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sm[0]


_SIG = "void(float32[::1], float32[::1])"
KERNELS = {"naive": (reduce_interleaved_kernel, _SIG), "optimized": (reduce_strided_kernel, _SIG)}


def check_input(x) -> None:
    """x: a 1-D, C-contiguous float32 array of at least one element (ValueError otherwise)."""
    launch.check_array("x", x, dtype=np.float32, ndim=1)
    if x.shape[0] == 0:
        raise ValueError("x: expected at least one element, got an empty array")


def reduce_blocks(kernel, x, per_block: int, threads: int = THREADS):
    """The sum of x as a float32 array of shape (1,), by ``kernel`` (block b of ``threads`` threads
    sums the ``per_block`` elements from b * per_block into partial[b]) run on x, then on its
    partials, until one block is left. NumPy in, NumPy out; a device array in, a device array out.

    Shared by days 23-26: a day passes its own kernel and how many elements one block takes."""
    check_input(x)
    (src,) = launch.to_device(x)
    while True:
        blocks = launch.blocks(src.shape[0], per_block)
        partial = launch.empty((blocks,), np.float32)  # the last pass: shape (1,), the result
        kernel[blocks, threads](src, partial)
        if blocks == 1:
            return launch.result(partial, x)
        src = partial  # the next pass sums the partial sums: a tree over blocks


def naive(x):
    return reduce_blocks(reduce_interleaved_kernel, x, THREADS)


def optimized(x):
    return reduce_blocks(reduce_strided_kernel, x, THREADS)


def library(x):
    """CuPy's sum (CUB's device reduction): a row of the benchmark table."""
    import cupy

    return cupy.sum(cupy.asarray(x)).reshape(1)
