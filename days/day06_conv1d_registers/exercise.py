"""Day 06 exercise: 1D convolution -- out[i] = sum_j mask[j] * x[i + j - MASK_RADIUS], zeros outside x.

Write the two kernels below; the host functions that launch them are given (inputs and the NumPy
reference come from solutions/, as the grader takes them).
Read lessons/day06_conv1d_registers.md first: it opens with the five memory spaces.
Grade with:  make check DAY=6
"""

import numpy as np

from course import cuda, launch
from numba import float32  # noqa: F401  (you will need it; numba names only after the course import)

TITLE = "1D convolution: the five memory spaces, mask and window in registers"
MEMORY_SPACE = "register"
VERSIONS = ("naive", "optimized")

MASK_RADIUS = 8
MASK_WIDTH = 2 * MASK_RADIUS + 1  # 17 taps: wide enough that naive is limited by loads, not DRAM
THREADS = 256
OUTPUTS_PER_THREAD = 2  # measured on the H200: 2 beats 1, 4 and 8 (the lesson says why)
WINDOW = OUTPUTS_PER_THREAD + MASK_WIDTH - 1  # 18 inputs cover 2 outputs


@cuda.jit
def conv1d_naive_kernel(x, mask, out):
    """One thread per output i = cuda.grid(1) (guard i < x.size).

    out[i] = sum over j in range(MASK_WIDTH) of mask[j] * x[i + j - MASK_RADIUS], where an index
    outside 0..n-1 contributes zero. Read mask and x straight from global memory.
    """
    raise NotImplementedError("Day 06: guard i < n, loop j over MASK_WIDTH taps skipping indices outside x, "
                              "accumulate in a float32, store (8 lines)")


@cuda.jit
def conv1d_registers_kernel(x, mask, out):
    """Register reuse: each thread computes OUTPUTS_PER_THREAD consecutive outputs per trip.

    1. Copy the MASK_WIDTH taps into m = cuda.local.array(MASK_WIDTH, float32) once per thread.
    2. Grid-stride over chunks: chunk = cuda.grid(1), step cuda.gridsize(1), while
       chunk * OUTPUTS_PER_THREAD < n. The chunk's outputs are first .. first + OUTPUTS_PER_THREAD - 1.
    3. Load the WINDOW inputs x[first - MASK_RADIUS .. first - MASK_RADIUS + WINDOW - 1] into
       w = cuda.local.array(WINDOW, float32), zero where the index falls outside x.
    4. out[first + o] = sum_j m[j] * w[o + j] for each o whose output index is < n.

    Only constant loop bounds (range(MASK_WIDTH), range(WINDOW), range(OUTPUTS_PER_THREAD)): the
    compiler then unrolls the loops and m and w live in registers (the grader checks stack frame 0).
    """
    raise NotImplementedError("Day 06: taps into a local array, then a grid-stride loop over chunks "
                              "that fills a window and does the multiply-adds (20 lines)")


_SIG = "void(float32[::1], float32[::1], float32[::1])"
KERNELS = {"naive": (conv1d_naive_kernel, _SIG), "optimized": (conv1d_registers_kernel, _SIG)}


def _check(x, mask):
    launch.check_array("x", x, dtype=np.float32, ndim=1)
    launch.check_array("mask", mask, dtype=np.float32, shape=(MASK_WIDTH,))


def naive(x, mask):
    _check(x, mask)
    d_x, d_mask = launch.to_device(x, mask)
    out = launch.empty(x.shape, np.float32)
    conv1d_naive_kernel[launch.blocks(x.size, THREADS), THREADS](d_x, d_mask, out)
    return launch.result(out, x, mask)


def optimized(x, mask):
    _check(x, mask)
    d_x, d_mask = launch.to_device(x, mask)
    out = launch.empty(x.shape, np.float32)
    blocks = launch.grid_stride_blocks(launch.blocks(x.size, OUTPUTS_PER_THREAD), THREADS)
    conv1d_registers_kernel[blocks, THREADS](d_x, d_mask, out)
    return launch.result(out, x, mask)


def library(x, mask):
    """The same filter through CuPy's ndimage (zero padding, centred mask): a benchmark row."""
    import cupy
    from cupyx.scipy import ndimage

    return ndimage.correlate1d(cupy.asarray(x), cupy.asarray(mask), mode="constant", cval=0.0)
