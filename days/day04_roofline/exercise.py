"""Day 04 exercise: bandwidth and the roofline -- scale a vector, out[i] = alpha * x[i], at the copy rate.

Write the three kernels below; the host functions that launch them are given.
Grade with:  make check DAY=4
"""

import numpy as np

from course import cuda, launch

TITLE = "Bandwidth and the roofline"
MEMORY_SPACE = "global"
VERSIONS = ("naive", "grid_stride", "optimized")
THREADS = 256
UNROLL = 4



@cuda.jit
def scale_naive_kernel(alpha, x, out):
    """One thread per element: out[i] = alpha * x[i] for i = cuda.grid(1) < out.size."""
    raise NotImplementedError("Day 04: i = cuda.grid(1); guard i < out.size; write out[i] (3 lines)")


@cuda.jit
def scale_grid_stride_kernel(alpha, x, out):
    """A grid-stride loop: start at cuda.grid(1), step by cuda.gridsize(1), one element per trip."""
    raise NotImplementedError("Day 04: a while loop from cuda.grid(1) in steps of cuda.gridsize(1) (5 lines)")


@cuda.jit
def scale_unrolled_kernel(alpha, x, out):
    """The grid-stride loop, four elements per trip: load x[i], x[i + s], x[i + 2s], x[i + 3s] into
    four locals first, then write the four results, then i += 4s. Keep going while i + 3s < n; a
    second loop finishes the tail one element at a time. The grid is a quarter of n's threads at
    most, so each thread makes several trips.
    """
    raise NotImplementedError("Day 04: an unrolled grid-stride loop, four loads before four stores, "
                              "then a tail loop (15 lines)")


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


def roofline(intensity, peak_tflops: float = 51.0, bandwidth_tbs: float = 4.1):
    """Attainable TFLOP/s at an arithmetic intensity (FLOP per byte): min(peak, intensity * bandwidth).
    Defaults are the H200's measured FP32 GEMM rate and device copy rate."""
    return np.minimum(peak_tflops, np.asarray(intensity, dtype=np.float64) * bandwidth_tbs)
