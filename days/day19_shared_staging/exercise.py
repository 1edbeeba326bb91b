"""Day 19 exercise: staging through shared memory and barriers -- reverse each block's segment of an array.

x (n,) float32 is cut into segments of SEGMENT = 1024 elements; the last one holds the n % SEGMENT
that are left (when there are any). Each segment is reversed in place of itself:

    out[s * SEGMENT + t] = x[s * SEGMENT + (L - 1 - t)],  L = min(SEGMENT, n - s * SEGMENT), 0 <= t < L

so every full segment is mirrored about its middle and the last, partial one about its own.

v1 naive      one thread per element, a block of 1024 threads per segment: thread t reads x at the
              mirrored index base + L - 1 - t and writes out[base + t]. No shared memory.
v2 optimized  a block of 256 threads stages its segment in shared memory, four coalesced loads a
              thread (all in flight before the first store waits), one barrier, then four coalesced
              stores of out[base + s] = seg[L - 1 - s]: the reversal happens on chip, where a warp
              reading 32 consecutive words backwards still hits 32 different banks.

What the simulator counts (course.traffic) and what it means: a warp of the naive kernel reads 32
consecutive floats in reverse lane order, which is the same 4 sectors a forward read touches (the
coalescer merges a warp's addresses into sectors, whatever lane asks for which), so for full segments
both versions move 4 sectors a request; only a partial last segment whose length is not a multiple of
8 costs the naive read a fifth, misaligned sector. The reversal is the simplest permutation that
shared memory and a barrier serve; day 20 needs the same staging for a permutation (a transpose)
that no choice of lanes can make coalesced.

Napkin math: 8 bytes an element (a load and a store), no FLOPs: n = 2^26 moves 537 MB, ~0.13 ms at the
H200's ~4.2 TB/s copy rate. Both versions move those bytes once; the difference is bytes in flight.
Keeping ~4.2 TB/s with ~0.6 us of DRAM latency needs ~2.5 MB in flight, ~19 KB per SM. The naive
kernel has one 4-byte load outstanding per thread (2048 threads an SM: 8 KB, day 01 measured one
element a thread at 61 % of the copy rate); the staged kernel has four (32 KB an SM), at the price of
a barrier per segment and a shared store and load per element, which the SM serves from SRAM at one
wavefront a request. Expected: the staged kernel near the grid-stride copy rate, naive well below.

What you write (each raises NotImplementedError with its hint until you do):
  reverse_naive_kernel   i = cuda.grid(1); L = the segment's length; guard i < n; out[i] = x[base + L - 1 - t] (7
                         lines)
  reverse_staged_kernel  stage the segment with coalesced loads, one barrier, coalesced stores read backwards from
                         shared (25 lines)
Everything else in this file is given. Grade with:  make check DAY=19
"""

import numpy as np

from course import cuda, launch
from numba import float32, uint64  # numba names only after the course import

TITLE = "Staging through shared memory and barriers"
MEMORY_SPACE = "shared"
VERSIONS = ("naive", "optimized")
# One element; a warp -1; a segment -1 and +1 (a last segment of 1); a prime (a last segment of 3).
TEST_SIZES = (1, 31, 1023, 1025, 4099)
BENCH_SIZES = (1 << 26,)  # 268 MB in, 268 MB out: nine times the 60 MB L2
BOUND = "memory"

SEGMENT = 1024  # elements reversed together: the operation's constant, the same for every version
STAGE_THREADS = 256  # optimized: threads per block
ITEMS = SEGMENT // STAGE_THREADS  # 4 elements a thread: four loads in flight before the barrier


def make_inputs(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(n, dtype=np.float32),)


def reference(x):
    """Each SEGMENT-long piece reversed, the last partial piece reversed within its own length."""
    n = x.size
    full = n - n % SEGMENT
    out = np.empty_like(x)
    out[:full] = x[:full].reshape(-1, SEGMENT)[:, ::-1].ravel()
    out[full:] = x[full:][::-1]
    return out


def traffic(x):
    """(minimum bytes moved through device memory, floating-point operations)."""
    return 2 * x.nbytes, 0


@cuda.jit
def reverse_naive_kernel(x, out):
    """One thread per element, a block of SEGMENT threads per segment: i = cuda.grid(1), t its index
    in the block, base = cuda.blockIdx.x * SEGMENT and L = min(SEGMENT, n - base) the segment's length.
    Guard i < n, then out[i] = x[base + L - 1 - t] (read backwards, write forwards)."""
    raise NotImplementedError("Day 19: i = cuda.grid(1); L = the segment's length; guard i < n; out[i] = x[base + L - "
                              "1 - t] (7 lines)")


@cuda.jit
def reverse_staged_kernel(x, out):
    """Block b (STAGE_THREADS = 256 threads) owns segment b: base = b * SEGMENT, L its length (as in
    the naive kernel).

    1. seg = cuda.shared.array(SEGMENT, float32). Thread t loads slots s = t, t + 256, t + 512, t + 768
       (ITEMS of them): seg[s] = x[base + s], for s < L only. Consecutive threads load consecutive
       floats: every warp-wide load is coalesced.
    2. cuda.syncthreads(): a thread is about to read slots that other threads (other warps) loaded.
    3. The same slots s: out[base + s] = seg[L - 1 - s] for s < L: coalesced stores, the reversal done
       by the shared-memory read.
    A full segment (L == SEGMENT, every block but perhaps the last) needs no guard: take that path
    with uint64 indices, so every load and store is one address plus a constant.
    """
    raise NotImplementedError("Day 19: stage the segment with coalesced loads, one barrier, coalesced stores read "
                              "backwards from shared (25 lines)")


_SIG = "void(float32[::1], float32[::1])"
KERNELS = {"naive": (reverse_naive_kernel, _SIG), "optimized": (reverse_staged_kernel, _SIG)}


def _check(x):
    launch.check_array("x", x, dtype=np.float32, ndim=1)


def naive(x):
    _check(x)
    (d_x,) = launch.to_device(x)
    out = launch.empty(x.shape, np.float32)
    reverse_naive_kernel[launch.blocks(x.size, SEGMENT), SEGMENT](d_x, out)
    return launch.result(out, x)


def optimized(x):
    _check(x)
    (d_x,) = launch.to_device(x)
    out = launch.empty(x.shape, np.float32)
    reverse_staged_kernel[launch.blocks(x.size, SEGMENT), STAGE_THREADS](d_x, out)
    return launch.result(out, x)


def library(x):
    """The same job in CuPy, as a user would write it: a reversed view of the full segments copied
    into the output, then the reversed tail (a benchmark row)."""
    import cupy

    x = cupy.asarray(x)
    n = x.size
    full = n - n % SEGMENT
    out = cupy.empty_like(x)
    out[:full].reshape(-1, SEGMENT)[...] = x[:full].reshape(-1, SEGMENT)[:, ::-1]
    out[full:] = x[full:][::-1]
    return out
