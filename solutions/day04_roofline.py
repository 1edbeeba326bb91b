"""Day 04: bandwidth and the roofline -- scale a vector, out[i] = alpha * x[i], at the copy rate.

v1 naive        one thread per element: each thread has one 4-byte load in flight, about 8 KB per
                SM, well short of the ~19 KB per SM that Little's law asks for at 4.1 TB/s.
v2 grid_stride  a grid sized to the GPU (8 blocks of 256 per SM) looping over the array: far fewer
                blocks to schedule, but still one load in flight per thread per trip.
v3 optimized    the grid-stride loop unrolled four times, all four loads issued before the first
                store: four times the bytes in flight per thread, the same coalesced pattern.

Napkin math: 8 bytes and 1 FLOP per element, an arithmetic intensity of 1/8 FLOP per byte. The
H200's ridge point is ~51 TFLOP/s / 4.1 TB/s = 12.4 FLOP per byte, 100 times higher: this kernel
can reach 0.5 TFLOP/s at best, 1 % of the FP32 peak, and that is the right answer. n = 2^27 moves
1.07 GB: ~0.26 ms at the copy rate.
"""

import numpy as np

from course import cuda, launch

TITLE = "Bandwidth and the roofline"
MEMORY_SPACE = "global"
VERSIONS = ("naive", "grid_stride", "optimized")
TEST_SIZES = (1, 255, 257, 1021, 4099)  # one element, a block -1 and +1, primes
BENCH_SIZES = (1 << 27,)  # 512 MB in, 512 MB out: ~18x the 60 MB L2
BOUND = "memory"
THREADS = 256
UNROLL = 4


def make_inputs(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n, dtype=np.float32)
    alpha = float(rng.uniform(0.5, 2.0))
    return x, alpha


def reference(x, alpha):
    return (np.float64(np.float32(alpha)) * x.astype(np.float64)).astype(np.float32)


def traffic(x, alpha):
    """(minimum bytes moved through device memory, floating-point operations)."""
    return 2 * x.nbytes, x.size


@cuda.jit
def scale_naive_kernel(alpha, x, out):
    """One thread per element: out[i] = alpha * x[i] for i = cuda.grid(1) < out.size (the grid has
    ceil(n / 256) blocks of 256 threads, so the last block may hang past the end)."""
    # EXERCISE: i = cuda.grid(1); guard i < out.size; write out[i]
    i = cuda.grid(1)
    if i < out.size:
        out[i] = alpha * x[i]


@cuda.jit
def scale_grid_stride_kernel(alpha, x, out):
    """A grid-stride loop: the grid is sized to the GPU (8 blocks of 256 per SM), not to n, so start
    at cuda.grid(1) and step by cuda.gridsize(1) while i < out.size, one element per trip."""
    # EXERCISE: a while loop from cuda.grid(1) in steps of cuda.gridsize(1)
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < out.size:
        out[i] = alpha * x[i]  # the store waits for this load: one load in flight per trip
        i += stride


@cuda.jit
def scale_unrolled_kernel(alpha, x, out):
    """The grid-stride loop, four elements per trip: load x[i], x[i + s], x[i + 2s], x[i + 3s] into
    four locals first, then write the four results, then i += 4s (s = cuda.gridsize(1)). Keep going
    while i + 3s < n; a second loop finishes the tail one element at a time. The grid is a quarter
    of n's threads at most, so each thread makes several trips.
    """
    # EXERCISE: an unrolled grid-stride loop, four loads before four stores, then a tail loop
    n = out.size
    stride = cuda.gridsize(1)
    i = cuda.grid(1)
    # Four independent loads before any store: each warp still reads 128 contiguous bytes per
    # load, and the SM has four of them outstanding per warp instead of one.
    while i + 3 * stride < n:
        x0 = x[i]
        x1 = x[i + stride]
        x2 = x[i + 2 * stride]
        x3 = x[i + 3 * stride]
        out[i] = alpha * x0
        out[i + stride] = alpha * x1
        out[i + 2 * stride] = alpha * x2
        out[i + 3 * stride] = alpha * x3
        i += 4 * stride
    while i < n:  # fewer than four strides left
        out[i] = alpha * x[i]
        i += stride


_SIG = "void(float32, float32[::1], float32[::1])"
KERNELS = {
    "naive": (scale_naive_kernel, _SIG),
    "grid_stride": (scale_grid_stride_kernel, _SIG),
    "optimized": (scale_unrolled_kernel, _SIG),
}


def _check(x, alpha):
    launch.check_array("x", x, dtype=np.float32, ndim=1)
    if not isinstance(alpha, (float, int, np.floating, np.integer)):
        raise ValueError(f"alpha: expected a real scalar, got {type(alpha).__name__}")


def naive(x, alpha):
    _check(x, alpha)
    (d_x,) = launch.to_device(x)
    out = launch.empty(x.shape, np.float32)
    scale_naive_kernel[launch.blocks(x.size, THREADS), THREADS](np.float32(alpha), d_x, out)
    return launch.result(out, x)


def grid_stride(x, alpha):
    _check(x, alpha)
    (d_x,) = launch.to_device(x)
    out = launch.empty(x.shape, np.float32)
    blocks = launch.grid_stride_blocks(x.size, THREADS)
    scale_grid_stride_kernel[blocks, THREADS](np.float32(alpha), d_x, out)
    return launch.result(out, x)


def optimized(x, alpha):
    _check(x, alpha)
    (d_x,) = launch.to_device(x)
    out = launch.empty(x.shape, np.float32)
    blocks = launch.grid_stride_blocks(launch.blocks(x.size, UNROLL), THREADS)
    scale_unrolled_kernel[blocks, THREADS](np.float32(alpha), d_x, out)
    return launch.result(out, x)


def library(x, alpha):
    """The same job as one CuPy expression (a row of the benchmark table)."""
    import cupy

    return cupy.multiply(cupy.asarray(x), np.float32(alpha))


def roofline(intensity, peak_tflops: float = 51.0, bandwidth_tbs: float = 4.1):
    """Attainable TFLOP/s at an arithmetic intensity (FLOP per byte): min(peak, intensity * bandwidth).
    Defaults are the H200's measured FP32 GEMM rate and device copy rate."""
    return np.minimum(peak_tflops, np.asarray(intensity, dtype=np.float64) * bandwidth_tbs)
