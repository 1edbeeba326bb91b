"""Day 01 exercise: threads and vector add -- out[i] = a[i] + b[i].

Write the two kernels below; the host functions that launch them are given.
Grade with:  make check DAY=1
"""

import numpy as np

from course import cuda, launch

TITLE = "Threads and vector add"
MEMORY_SPACE = "global"
VERSIONS = ("naive", "optimized")
THREADS = 256
UNROLL = 4


@cuda.jit
def add_naive_kernel(a, b, out):
    """One thread per element: thread i writes out[i] = a[i] + b[i].

    The grid has ceil(n / 256) blocks of 256 threads, so the last block may hang past the end
    of the arrays: threads with i >= n must do nothing.
    """
    raise NotImplementedError("Day 01: find this thread's index with cuda.grid(1), guard i < out.size, "
                              "write out[i] (3 lines)")


@cuda.jit
def add_grid_stride_kernel(a, b, out):
    """Grid-stride loop: the grid is smaller than n, so each thread starts at cuda.grid(1) and steps
    by cuda.gridsize(1) until it passes the end.

    Stretch: handle four elements per trip (i, i + stride, i + 2*stride, i + 3*stride), issuing all
    eight loads before the four stores, then finish the tail one element at a time.
    """
    raise NotImplementedError("Day 01: a while loop from cuda.grid(1) in steps of cuda.gridsize(1) "
                              "(5 lines; 15 with the four-way unroll)")


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
