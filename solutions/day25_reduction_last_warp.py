"""Day 25: reduction III, the last warp -- out[0] = sum_i x[i], x float32 (n,), out float32 (1,).

Both versions start where day 24 ended: a block of 256 threads owns 512 consecutive elements, and
each thread adds its two (t and t + 256) while loading, so the tree starts from 256 values and the
grid has half the blocks. Each block writes one partial sum; the host runs the same kernel again on
the partials until one value is left (2^28 floats: 524288 -> 1024 -> 2 -> 1, four launches).

v1 naive      sequential-addressing tree in shared memory with a barrier per halving down to 64
              values; then warp 0 alone finishes 64 -> 1 in shared memory, unrolled, with no
              block barrier, only cuda.syncwarp() between its steps (bar.warp.sync in the PTX).
v2 optimized  warp shuffles instead of shared memory below 32: each warp folds its 32 values in
              registers (shfl_down_sync, offsets 16 .. 1), lane 0 of each warp leaves one value in
              shared memory, one barrier, and warp 0 folds those eight the same way. One block
              barrier instead of three, and 8 floats of shared memory instead of 256.

Napkin math: 4 bytes read and one add per element: memory-bound. 2^28 floats are 1 GiB, ~18x the
L2; at the H200's ~4.2 TB/s copy rate that is ~0.26 ms, and a pure read can go a little faster.
The partials add 1/512 of that (2 MiB). With one element pair per thread the grid is 524288
blocks: every block pays its reduction and its launch on the SM, and a thread has only two loads
in flight, so both versions stay short of the copy rate; day 26 fixes that with a grid-stride loop.
"""

import numpy as np

from course import cuda, launch
from numba import float32
from solutions.day23_reduction_interleaved import (  # noqa: F401  (the days' problem: the graders read these)
    RTOL,
    check_input,
    make_inputs,
    reference,
    traffic,
)

TITLE = "Reduction III: the last warp"
MEMORY_SPACE = "shared"
VERSIONS = ("naive", "optimized")
THREADS = 256
SPAN = 2 * THREADS  # elements a block owns: two per thread, added during the load
WARP = 32
WARPS = THREADS // WARP
FULL_MASK = 0xFFFFFFFF
# One element; a block's span -1 and +1; a prime; two passes (9 partials, then one).
TEST_SIZES = (1, 255, 511, 513, 1021, 4099)
BENCH_SIZES = (1 << 28,)  # 1 GiB: ~18x the 60 MB L2
BOUND = "memory"


@cuda.jit(device=True)
def load_pair(x, t):
    """Day 24's first add during the load: x[i] + x[i + 256] for i = block * 512 + t, 0 past the end.
    A warp's two loads each read 128 consecutive bytes (coalesced)."""
    i = cuda.blockIdx.x * SPAN + t
    v = x[i] if i < x.size else float32(0.0)
    if i + THREADS < x.size:
        v += x[i + THREADS]
    return v


@cuda.jit(device=True)
def warp_step(partial, t, v, s):
    """One step of the last warp's tree in shared memory (lanes t = 0 .. 31 of warp 0, all of them):
    publish v in partial[t], then return v + partial[t + s].

    Two cuda.syncwarp() calls: one before the store (every lane has finished reading the slot it is
    about to overwrite: lane t - 2s read partial[t] in the step before) and one between the store and
    the load (lane t + s's store is done and visible before lane t reads it). Since Volta a warp's
    lanes are not in lock-step, so the order must be asked for; `volatile` alone only keeps the
    values out of registers, it does not make the lanes wait for one another."""
    # EXERCISE: syncwarp; store v in partial[t]; syncwarp; return v plus lane t + s's slot
    cuda.syncwarp()  # WAR: the slot's last reader (lane t - 2s, a step ago) is done before it is overwritten
    partial[t] = v
    cuda.syncwarp()  # RAW: lane t + s's store is visible before lane t reads it
    return v + partial[t + s]


@cuda.jit
def block_sum_unrolled_kernel(x, partials):  # x (n,), partials (ceil(n / 512),)
    """Block b writes partials[b] = the sum of x[512 b : 512 (b + 1)] (0 past the end of x).

    Given (day 24): every thread stores load_pair(x, t) in a shared array of 256 floats, and the
    block halves it with sequential addressing (threads t < s add partial[t + s] into partial[t],
    a barrier after each step) while s > 32, leaving 64 values in partial[0 .. 63].

    You write the last warp: threads t < 32 only, no more block barriers. Start from
    v = partial[t] + partial[t + 32], then v = warp_step(partial, t, v, s) for s = 16, 8, 4, 2, 1
    (written out: a fixed sequence, no loop, no `if t < s`: the lanes above s compute values nobody
    reads, which costs nothing in a warp that executes together anyway); lane 0 writes partials[b].
    """
    partial = cuda.shared.array(THREADS, float32)
    t = cuda.threadIdx.x
    partial[t] = load_pair(x, t)
    cuda.syncthreads()
    s = THREADS // 2
    while s > WARP:  # 128, 64: a barrier each, because the halves span several warps
        if t < s:
            partial[t] += partial[t + s]
        cuda.syncthreads()
        s //= 2
    # EXERCISE: warp 0 only: v = partial[t] + partial[t + 32], then warp_step for 16, 8, 4, 2, 1; lane 0 stores
    if t < WARP:  # one whole warp from here on: syncwarp with the full mask, no block barrier
        v = partial[t] + partial[t + WARP]
        v = warp_step(partial, t, v, 16)
        v = warp_step(partial, t, v, 8)
        v = warp_step(partial, t, v, 4)
        v = warp_step(partial, t, v, 2)
        v = warp_step(partial, t, v, 1)
        if t == 0:
            partials[cuda.blockIdx.x] = v


@cuda.jit(device=True)
def warp_sum(v):
    """Sum of v over the 32 lanes of the warp; lane 0 ends with the total (other lanes: anything).
    cuda.shfl_down_sync(FULL_MASK, v, offset) for offset 16, 8, 4, 2, 1: each step reads the
    register of the lane `offset` above, so no memory, no address and no separate barrier: the
    _sync makes the 32 lanes meet before any of them reads."""
    # EXERCISE: offset = 16; while offset > 0: v += cuda.shfl_down_sync(FULL_MASK, v, offset); offset //= 2
    offset = WARP // 2
    while offset > 0:
        v += cuda.shfl_down_sync(FULL_MASK, v, offset)
        offset //= 2
    return v


@cuda.jit
def block_sum_shuffle_kernel(x, partials):  # x (n,), partials (ceil(n / 512),)
    """The same partials[b] as above, with no shared-memory tree: v = load_pair(x, t) (given), then
    v = warp_sum(v); lane 0 of each warp stores its warp's sum in a shared array of WARPS floats;
    one cuda.syncthreads(); warp 0 reads those WARPS values (0 for lanes >= WARPS), folds them with
    warp_sum, and lane 0 writes partials[b]. Every thread reaches the one barrier."""
    warp_sums = cuda.shared.array(WARPS, float32)
    t = cuda.threadIdx.x
    v = load_pair(x, t)
    # EXERCISE: warp_sum; lane 0 -> warp_sums[warp]; one barrier; warp 0 folds the WARPS slots; lane 0 stores
    lane = t % WARP
    warp = t // WARP
    v = warp_sum(v)
    if lane == 0:
        warp_sums[warp] = v
    cuda.syncthreads()  # the block's only barrier: the eight warp sums are in shared memory
    if warp == 0:
        v = warp_sum(warp_sums[lane] if lane < WARPS else float32(0.0))
        if lane == 0:
            partials[cuda.blockIdx.x] = v


_SIG = "void(float32[::1], float32[::1])"
KERNELS = {"naive": (block_sum_unrolled_kernel, _SIG), "optimized": (block_sum_shuffle_kernel, _SIG)}


def reduce_passes(kernel, d_x):
    """Launch ``kernel`` (one partial per 512 elements) on d_x, then on its partials, until one value
    is left: the (1,) device array of the sum. Every pass reads what the last wrote, in stream order."""
    d = d_x
    while True:
        out = launch.empty((launch.blocks(d.size, SPAN),), np.float32)  # poisoned: every slot is written
        kernel[out.size, THREADS](d, out)
        if out.size == 1:
            return out
        d = out


def _run(kernel, x):
    check_input(x)
    (d_x,) = launch.to_device(x)
    return launch.result(reduce_passes(kernel, d_x), x)


def naive(x):
    return _run(block_sum_unrolled_kernel, x)


def optimized(x):
    return _run(block_sum_shuffle_kernel, x)


def library(x):
    """CuPy's sum (CUB's device reduction), as shape (1,): a row of the benchmark table."""
    import cupy

    return cupy.sum(cupy.asarray(x)).reshape(1)
