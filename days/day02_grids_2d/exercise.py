"""Day 02 exercise: 2D grids -- add a bias row to every row of a matrix, out[r, c] = x[r, c] + bias[c].

v1 naive      one thread per row, looping over the columns: the 32 threads of a warp sit 32 rows
              apart, so every load instruction touches 32 different 32-byte sectors for 128 useful
              bytes, and a (16384, 8192) matrix gets only 16384 threads to hide memory latency with.
v2 optimized  2D blocks of (32, 8) threads, x along the columns: a warp reads 128 contiguous bytes of
              one row. The grid is sized to the GPU and strides over both axes; each thread keeps its
              column's bias in a register and handles four rows per trip (four loads in flight).

Napkin math: 8 bytes per element (one float32 load, one store; the bias is cols * 4 bytes, read
once), 1 FLOP: memory-bound. A (16384, 8192) matrix moves 1.07 GB: ~0.26 ms at the H200's ~4.1 TB/s.

What you write (each raises NotImplementedError with its hint until you do):
  bias_add_rows_kernel  r = cuda.grid(1); guard r < rows; loop c over the columns writing out[r, c] (5 lines)
  bias_add_2d_kernel    c, r = cuda.grid(2); a column loop around a four-rows-a-trip row loop and its tail; bias[c]
                        hoisted (21 lines)
Everything else in this file is given. Grade with:  make check DAY=2
"""

import numpy as np

from course import cuda, launch

TITLE = "2D grids: rows, columns and which way a warp runs"
MEMORY_SPACE = "global"
VERSIONS = ("naive", "optimized")
TEST_SIZES = ((1, 1), (17, 33), (31, 257), (64, 65))  # (rows, cols): a single element, primes, a block +1
BENCH_SIZES = ((16384, 8192),)  # 512 MB in, 512 MB out: ~18x the 60 MB L2
BOUND = "memory"
ROW_THREADS = 128  # naive: threads per block, one per row
BLOCK = (32, 8)  # optimized: (x = columns, y = rows); 32 along x so one warp spans one row segment
UNROLL = 4  # rows per thread per trip in the optimized kernel


def make_inputs(n, seed: int = 0):
    rows, cols = (n, n) if isinstance(n, int) else n
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols), dtype=np.float32)  # (rows, cols)
    bias = rng.standard_normal(cols, dtype=np.float32)  # (cols,)
    return x, bias


def reference(x, bias):
    return (x.astype(np.float64) + bias.astype(np.float64)[None, :]).astype(np.float32)


def traffic(x, bias):
    """(minimum bytes moved through device memory, floating-point operations)."""
    return 2 * x.nbytes + bias.nbytes, x.size


@cuda.jit
def bias_add_rows_kernel(x, bias, out):
    """One thread per row: thread r = cuda.grid(1) loops over every column c and writes
    out[r, c] = x[r, c] + bias[c] (x and out are (rows, cols), bias is (cols,)).

    The grid has ceil(rows / 128) blocks of 128 threads: threads with r >= rows must do nothing.
    """
    raise NotImplementedError("Day 02: r = cuda.grid(1); guard r < rows; loop c over the columns writing out[r, c] (5 "
                              "lines)")


@cuda.jit
def bias_add_2d_kernel(x, bias, out):
    """2D blocks of (32, 8) threads with x along the columns: ``c, r = cuda.grid(2)`` (x first), so
    the 32 threads of a warp read 32 neighbouring floats of one row.

    The grid is smaller than the matrix (about 16 blocks per SM: grid_2d), so loop: columns from c
    in steps of cuda.gridsize(2)[0] and, for each column, rows from r in steps of cuda.gridsize(2)[1].
    Load bias[c] once per column, not once per element. The loop conditions guard both axes.

    Four rows per trip of the row loop (r, r + s, r + 2s, r + 3s with s the row step): the four loads
    before the four stores, so they are in flight together; then the remaining rows one at a time.
    """
    raise NotImplementedError("Day 02: c, r = cuda.grid(2); a column loop around a four-rows-a-trip row loop and its "
                              "tail; bias[c] hoisted (21 lines)")


_SIG = "void(float32[:, ::1], float32[::1], float32[:, ::1])"
KERNELS = {"naive": (bias_add_rows_kernel, _SIG), "optimized": (bias_add_2d_kernel, _SIG)}


def _check(x, bias):
    launch.check_array("x", x, dtype=np.float32, ndim=2)
    launch.check_array("bias", bias, dtype=np.float32, shape=(x.shape[1],))


def grid_2d(rows: int, cols: int) -> tuple[int, int]:
    """(blocks along columns, blocks along rows) for the optimized kernel: about 16 blocks per SM in
    all, columns first (each thread then strides down its column), never more than the data needs.
    At 40 registers a thread only 6 blocks of 256 fit on an SM: a grid of 8 per SM would run in
    1.3 waves, the last one a third full (77 % of the copy rate measured, against 84 % with 16)."""
    budget = launch.sm_count() * 16
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


def library(x, bias):
    """The same job as one broadcast CuPy expression (a row of the benchmark table)."""
    import cupy

    return cupy.add(cupy.asarray(x), cupy.asarray(bias)[None, :])
