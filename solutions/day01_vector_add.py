"""Day 01: threads and vector add -- out[i] = a[i] + b[i].

v1 naive      one thread per element: a grid of ceil(n / 256) blocks, each thread guards i < n.
v2 optimized  grid-stride loop over a grid sized to the GPU (a few blocks per SM), four elements per
              thread per trip with all loads issued before the stores: fewer blocks to schedule and
              more independent loads in flight per thread.

Napkin math: 12 bytes per element (two float32 loads, one store), 1 FLOP: memory-bound by far.
At the H200's ~4.1 TB/s copy rate, n = 2^26 moves 805 MB in ~0.2 ms.
"""

import numpy as np

from course import cuda, launch

TITLE = "Threads and vector add"
MEMORY_SPACE = "global"
VERSIONS = ("naive", "optimized")
TEST_SIZES = (1, 255, 257, 1021, 4099)  # one thread, a block -1 and +1, primes
BENCH_SIZES = (1 << 26,)
THREADS = 256
UNROLL = 4


def make_inputs(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(n, dtype=np.float32)
    b = rng.standard_normal(n, dtype=np.float32)
    return a, b


def reference(a, b):
    return (a.astype(np.float64) + b.astype(np.float64)).astype(np.float32)


def traffic(a, b):
    """(minimum bytes moved through device memory, floating-point operations)."""
    return 3 * a.size * a.itemsize, a.size


@cuda.jit
def add_naive_kernel(a, b, out):
    """One thread per element: thread i writes out[i] = a[i] + b[i].

    The grid has ceil(n / 256) blocks of 256 threads, so the last block may hang past the end
    of the arrays: threads with i >= n must do nothing.
    """
    # EXERCISE: find this thread's index with cuda.grid(1), guard i < out.size, write out[i]
    i = cuda.grid(1)
    if i < out.size:  # the last block hangs past the end when n is not a multiple of 256
        out[i] = a[i] + b[i]


@cuda.jit
def add_grid_stride_kernel(a, b, out):
    """Grid-stride loop: the grid is smaller than n, so each thread starts at cuda.grid(1) and steps
    by cuda.gridsize(1) until it passes the end, four elements a trip (i, i + stride, i + 2*stride,
    i + 3*stride) with all eight loads issued before the four stores, then the tail one at a time.
    """
    # EXERCISE: from cuda.grid(1) in steps of 4 * cuda.gridsize(1): eight loads, four stores; then the tail
    n = out.size
    stride = cuda.gridsize(1)
    i = cuda.grid(1)
    # Four elements a trip, stride apart: each warp still reads 128 contiguous bytes per load,
    # and the eight loads are independent, so the memory system sees them all before the adds.
    while i + 3 * stride < n:
        a0, a1, a2, a3 = a[i], a[i + stride], a[i + 2 * stride], a[i + 3 * stride]
        b0, b1, b2, b3 = b[i], b[i + stride], b[i + 2 * stride], b[i + 3 * stride]
        out[i] = a0 + b0
        out[i + stride] = a1 + b1
        out[i + 2 * stride] = a2 + b2
        out[i + 3 * stride] = a3 + b3
        i += 4 * stride
    while i < n:  # the tail: fewer than four strides left
        out[i] = a[i] + b[i]
        i += stride


_SIG = "void(float32[::1], float32[::1], float32[::1])"
KERNELS = {"naive": (add_naive_kernel, _SIG), "optimized": (add_grid_stride_kernel, _SIG)}


def _check(a, b):
    launch.check_array("a", a, dtype=np.float32, ndim=1)
    launch.check_array("b", b, dtype=np.float32, shape=a.shape)


def naive(a, b):
    _check(a, b)
    d_a, d_b = launch.to_device(a, b)
    out = launch.empty(a.shape, np.float32)
    add_naive_kernel[launch.blocks(a.size, THREADS), THREADS](d_a, d_b, out)
    return launch.result(out, a, b)


def optimized(a, b):
    _check(a, b)
    d_a, d_b = launch.to_device(a, b)
    out = launch.empty(a.shape, np.float32)
    blocks = launch.grid_stride_blocks(launch.blocks(a.size, UNROLL), THREADS)
    add_grid_stride_kernel[blocks, THREADS](d_a, d_b, out)
    return launch.result(out, a, b)


def library(a, b):
    """The same job as one CuPy expression (a row of the benchmark table)."""
    import cupy

    return cupy.add(cupy.asarray(a), cupy.asarray(b))
