"""Day 02 exercise: 2D grids -- add a bias row to every row of a matrix, out[r, c] = x[r, c] + bias[c].

Write the two kernels below; the host functions that launch them are given.
Grade with:  make check DAY=2
"""

import numpy as np

from course import cuda, launch

TITLE = "2D grids: rows, columns and which way a warp runs"
MEMORY_SPACE = "global"
VERSIONS = ("naive", "optimized")
ROW_THREADS = 128  # naive: threads per block, one per row
BLOCK = (32, 8)  # optimized: (x = columns, y = rows); 32 along x so one warp spans one row segment
UNROLL = 4  # rows per thread per trip in the optimized kernel


@cuda.jit
def bias_add_rows_kernel(x, bias, out):
    """One thread per row (x and out are (rows, cols), bias is (cols,)): thread r = cuda.grid(1)
    loops over every column c and writes out[r, c] = x[r, c] + bias[c].

    The grid has ceil(rows / 128) blocks of 128 threads: threads with r >= rows must do nothing.
    """
    raise NotImplementedError("Day 02: r = cuda.grid(1); guard r < rows; loop c over the columns "
                              "writing out[r, c] (5 lines)")


@cuda.jit
def bias_add_2d_kernel(x, bias, out):
    """2D blocks of (32, 8) threads with x along the columns: ``c, r = cuda.grid(2)`` (x first!),
    so the 32 threads of a warp read 32 neighbouring floats of one row.

    The grid is smaller than the matrix (about 8 blocks per SM), so loop: columns from c in steps
    of cuda.gridsize(2)[0], and for each column, rows from r in steps of cuda.gridsize(2)[1].
    Load bias[c] once per column, not once per element. Guard both axes.

    Stretch (graded): handle four rows per trip of the row loop (r, r + s, r + 2s, r + 3s), issuing
    the four loads before the four stores, then finish the remaining rows one at a time.
    """
    raise NotImplementedError("Day 02: c, r = cuda.grid(2); a column loop around a row loop, bias[c] "
                              "hoisted (8 lines; 18 with the four-row unroll)")


_SIG = "void(float32[:, ::1], float32[::1], float32[:, ::1])"
KERNELS = {"naive": (bias_add_rows_kernel, _SIG), "optimized": (bias_add_2d_kernel, _SIG)}


def _check(x, bias):
    launch.check_array("x", x, dtype=np.float32, ndim=2)
    launch.check_array("bias", bias, dtype=np.float32, shape=(x.shape[1],))


def grid_2d(rows: int, cols: int) -> tuple[int, int]:
    """(blocks along columns, blocks along rows) for the optimized kernel: about 8 blocks per SM in
    all, columns first (each thread then strides down its column), never more than the data needs."""
    budget = launch.sm_count() * 8
    bx = min(launch.blocks(cols, BLOCK[0]), budget)
    by = max(1, min(launch.blocks(rows, BLOCK[1] * UNROLL), budget // bx))
    return bx, by


def naive(x, bias):
    _check(x, bias)
    d_x, d_bias = launch.to_device(x, bias)
    out = launch.empty(x.shape, np.float32)
    bias_add_rows_kernel[launch.blocks(x.shape[0], ROW_THREADS), ROW_THREADS](d_x, d_bias, out)
    return launch.result(out, x, bias)


def optimized(x, bias):
    _check(x, bias)
    d_x, d_bias = launch.to_device(x, bias)
    out = launch.empty(x.shape, np.float32)
    bias_add_2d_kernel[grid_2d(*x.shape), BLOCK](d_x, d_bias, out)
    return launch.result(out, x, bias)

