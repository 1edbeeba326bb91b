"""Day 27 exercise: scan I -- Kogge-Stone, out[i] = x[0] + x[1] + ... + x[i] (the inclusive prefix sum).

float32 or int32 (n,) in, the same shape and dtype out; int32 wraps as int32 does (the sum modulo 2^32).

v1 naive      one thread per output, each sums its own prefix x[0..i] in a loop from global memory:
              n (n + 1) / 2 adds and loads, quadratic work. A warp's lanes read the same x[j] in
              step j (a broadcast: one sector a request), so the loads are cheap; their number is not.
v2 optimized  Kogge-Stone in shared memory: a block of THREADS threads stages its segment in a shared
              array, then log2(THREADS) steps, in step d every thread t >= d adds the value d places to
              its left. Double-buffered: step d reads one half of the shared array and writes the other
              (ping-pong), so no thread reads a word another thread writes in the same step, and one
              barrier a step suffices. Longer arrays: the block totals are scanned (the same driver,
              recursively) and block b adds the scanned total of blocks 0..b-1 back (three kernels).

Napkin math: the minimum is 4 bytes read and 4 written an element: 2^28 elements are 2 GiB, ~0.5 ms
at the H200's ~4.2 TB/s copy rate. The three-kernel driver moves ~4 n bytes (read x, write out, read
and write out again in the add-back): ~2x the minimum at best. Kogge-Stone does n log2(THREADS) adds
(9 a element at 512 threads; a sequential scan does 1) and 2 shared reads + 1 write an element a step,
with a barrier between steps: 9 steps x 3 shared requests a warp is ~27 requests for 32 elements, against
the DRAM's ~32 x 8 bytes: the shared pipe and the barrier latency bind before DRAM does. Expect well
under the copy rate (at 2^20 on the H200: 9 %, launches dominate); day 28 cuts the adds (Brent-Kung), day 29 the passes
(one pass with decoupled look-back, against CUB's cupy.cumsum). The naive version is quadratic: at
2^20 elements it does 5.5e11 adds; it is benchmarked at that size only so that it finishes.

What you write (each raises NotImplementedError with its hint until you do):
  scan_naive_kernel  i = cuda.grid(1); guard i < x.size; acc = x[0]; add x[1..i] in a loop; out[i] = acc (6 lines)
  scan_block_kernel  stage x in buf[0:THREADS], barrier; d = 1, 2, ...: read half src, write half dst, barrier, swap
                     (20 lines)
Everything else in this file is given. Grade with:  make check DAY=27
"""

import numpy as np

from course import cuda, launch

TITLE = "Scan I: Kogge-Stone"
MEMORY_SPACE = "shared"
VERSIONS = ("naive", "optimized")
THREADS = 512  # one element a thread: log2(512) = 9 Kogge-Stone steps a block
BUFFER = 2 * THREADS  # two halves of the shared array: the ping and the pong
# n is an int (float32 inputs) or (n, "int32"). One element; a block -1 and +1; primes (the largest:
# 9 blocks, so a scan of the block totals and an add-back); int32 near the wrap.
TEST_SIZES = (1, 511, 513, (1021, "int32"), 4099, (4099, "int32"), 1031)
NAIVE_SIZES = (1, 31, 33, (257, "int32"), 1021)  # the naive version is quadratic: keep it small in the simulator
# 4 MiB of int32: the quadratic naive version (5.5e11 adds) still finishes, and int32 is exact (a float32
# sum of 2^20 terms one after another drifts past 1e-5: measured on the H200); day 29 runs 2^28
BENCH_SIZES = ((1 << 20, "int32"),)
BOUND = "memory"
RTOL = 1e-5  # float32 against the float64 running sum; the inputs have mean 1, so |prefix| ~ sum(|x|)


def _size(n):
    """(length, dtype) from a size: an int means float32, (n, "int32") an int32 array."""
    if isinstance(n, tuple):
        return int(n[0]), np.dtype(n[1])
    return int(n), np.dtype(np.float32)


def make_inputs(n, seed: int = 0):
    length, dtype = _size(n)
    rng = np.random.default_rng(seed)
    if dtype == np.int32:
        # Anywhere in the int32 range: the running sum wraps every few elements, and a wrong add-back
        # or a lost element changes every later output.
        return (rng.integers(-(2**31), 2**31, size=length, dtype=np.int64).astype(np.int32),)
    # Mean 1: the prefix grows like i and stays far from zero, so a relative tolerance against the
    # prefix is a tolerance against the running sum(|x|) too.
    return (rng.standard_normal(length, dtype=np.float32) + np.float32(1.0),)


def reference(x):
    if x.dtype == np.int32:
        return np.cumsum(x, dtype=np.int32)  # NumPy wraps int32 arrays silently: the two's-complement sum
    return np.cumsum(x, dtype=np.float64).astype(np.float32)


def traffic(x):
    """(minimum bytes moved through device memory, FLOPs): read x once, write out once; n adds."""
    return 2 * x.size * x.itemsize, x.size


@cuda.jit
def scan_naive_kernel(x, out):  # x (n,), out (n,)
    """Thread i writes out[i] = x[0] + x[1] + ... + x[i], summing its own prefix in a loop.

    Guard i < x.size. Start the sum from x[0] (so it has x's type: float32 stays float32) and add
    x[1], ..., x[i] in order; store it into out[i] (an int32 store wraps the sum as int32 does).
    """
    raise NotImplementedError("Day 27: i = cuda.grid(1); guard i < x.size; acc = x[0]; add x[1..i] in a loop; out[i] = "
                              "acc (6 lines)")


@cuda.jit
def scan_block_kernel(x, out, sums):  # x (n,), out (n,), sums (blocks,)
    """Block b scans its segment x[b * THREADS .. b * THREADS + THREADS - 1] into out (inclusive,
    within the block only) and writes the segment's total to sums[b].

    buf = cuda.shared.array(BUFFER, x.dtype), BUFFER = 2 * THREADS: two halves, ping and pong.
    Thread t stores x[b * THREADS + t] in buf[t] (0 past the end of x), then cuda.syncthreads().
    Then for d = 1, 2, 4, ..., THREADS // 2: read the half written last (src), write the other (dst):
    buf[dst + t] = buf[src + t] + buf[src + t - d] for t >= d, buf[dst + t] = buf[src + t] for t < d;
    cuda.syncthreads() after each step (outside the if); swap the halves. Store buf[src + t] to out
    (guarded), and the last thread of the block stores it to sums[b]. Never read and write the same
    half in one step: thread t would read buf[t - d] while thread t - d rewrites it.
    """
    raise NotImplementedError("Day 27: stage x in buf[0:THREADS], barrier; d = 1, 2, ...: read half src, write half "
                              "dst, barrier, swap (20 lines)")


@cuda.jit
def add_block_sums_kernel(out, scanned):  # out (n,), scanned (blocks,): inclusive scan of the block totals
    """Launched with blocks - 1 blocks: block k adds scanned[k], the total of segments 0..k, to every
    element of segment k + 1 (segment 0 is already complete)."""
    b = cuda.blockIdx.x + 1  # segment 0 needs nothing added: no block is launched for it
    i = b * THREADS + cuda.threadIdx.x
    if i < out.size:
        out[i] += scanned[b - 1]  # one word for the whole block: a broadcast, served from cache


_F32 = "void(float32[::1], float32[::1])"
_F32_SUMS = "void(float32[::1], float32[::1], float32[::1])"
KERNELS = {
    "naive": (scan_naive_kernel, _F32),
    "optimized": (scan_block_kernel, _F32_SUMS),
    "optimized.int32": (scan_block_kernel, "void(int32[::1], int32[::1], int32[::1])"),
    "optimized.add_back": (add_block_sums_kernel, _F32),
    # The benchmark scans int32 (exact sums: no float rounding in the comparison).
    "naive.int32": (scan_naive_kernel, "void(int32[::1], int32[::1])"),
    "optimized.add_back.int32": (add_block_sums_kernel, "void(int32[::1], int32[::1])"),
}


def _check(x):
    launch.check_array("x", x, dtype=(np.float32, np.int32), ndim=1)
    if x.shape[0] < 1:
        raise ValueError(f"x: expected at least one element, got shape {tuple(x.shape)}")


def scan_blocks(x, out, block_scan=scan_block_kernel, add_back=add_block_sums_kernel, threads=THREADS):
    """The three-kernel scan of any length, on device arrays x (n,) and out (n,) of one dtype.

    1. ``block_scan[blocks, threads](x, out, sums)`` scans each segment of ``threads`` elements and
       writes its total to sums (blocks,);
    2. sums is scanned by this same function (recursively: one more level per factor of ``threads``);
    3. ``add_back[blocks - 1, threads](out, scanned)`` adds the total of all earlier segments to each
       segment after the first.
    """
    nblocks = launch.blocks(x.size, threads)
    sums = launch.empty(nblocks, x.dtype)
    block_scan[nblocks, threads](x, out, sums)
    if nblocks > 1:
        scanned = launch.empty(nblocks, x.dtype)
        scan_blocks(sums, scanned, block_scan, add_back, threads)
        add_back[nblocks - 1, threads](out, scanned)
    return out


def naive(x):
    _check(x)
    (d_x,) = launch.to_device(x)
    out = launch.empty(x.shape, x.dtype)
    scan_naive_kernel[launch.blocks(x.size, 256), 256](d_x, out)
    return launch.result(out, x)


def optimized(x):
    _check(x)
    (d_x,) = launch.to_device(x)
    out = launch.empty(x.shape, x.dtype)
    scan_blocks(d_x, out)
    return launch.result(out, x)


def library(x):
    """CuPy's cumsum (CUB's device scan): a row of the benchmark table."""
    import cupy

    return cupy.cumsum(cupy.asarray(x), dtype=x.dtype)
