"""Day 14: instruction-level parallelism -- column sums of a tall matrix (a bias gradient, say).

    out[c] = sum_r x[r, c]      x: (rows, cols), rows >> cols

Both versions split the rows into chunks (a 2D grid: columns x chunks) so the GPU has enough threads,
write one partial sum per (chunk, column), and a small kernel adds the partials.

v1 naive      one accumulator: every add waits for the one before it (a dependent chain), and
              each load issues only when the loop reaches it.
v2 optimized  four independent accumulators, four rows a trip with all four loads issued first:
              four chains the scheduler can interleave, four loads in flight per thread.

Napkin math: 4 bytes and 1 FLOP per element: memory-bound. (65536, 4096) reads 1.07 GB: ~0.26 ms at
the H200's ~4.1 TB/s copy rate. Measured on an H200: naive 355 us (71 % of the copy rate), optimized
275 us (92 %).
"""

import numpy as np

from course import cuda, launch  # first: course picks GPU or simulator before numba loads
from numba import float32

TITLE = "Instruction-level parallelism"
MEMORY_SPACE = "register"
VERSIONS = ("naive", "optimized")
ACCUMULATORS = 4
TEST_SIZES = ((1, 1), (255, 3), (257, 33), (1021, 7), (4099, 2))  # (rows, cols): tails of 1..3 rows
BENCH_SIZES = ((65536, 4096),)  # 1.07 GB read: ~18x the 60 MB L2
BOUND = "memory"
THREADS = 256
MIN_ROWS_PER_CHUNK = 64  # below this a thread's loop is too short to matter


def make_inputs(n, seed: int = 0):
    rows, cols = (n, 1) if isinstance(n, int) else n
    rng = np.random.default_rng(seed)
    # Positive values: column sums grow with rows and never cancel, so a relative tolerance is fair.
    x = rng.uniform(0.5, 1.5, size=(rows, cols)).astype(np.float32)  # (rows, cols)
    return (x,)


def reference(x):
    return x.astype(np.float64).sum(axis=0).astype(np.float32)


def traffic(x):
    """(minimum bytes moved through device memory, floating-point operations)."""
    return x.nbytes + 4 * x.shape[1], x.size


@cuda.jit
def colsum_one_acc_kernel(x, rows_per_chunk, partial):
    """Column c = blockIdx.x * blockDim.x + threadIdx.x (guard c < cols), chunk k = blockIdx.y.

    Sum x[r, c] for r in [k * rows_per_chunk, min((k + 1) * rows_per_chunk, rows)) into ONE
    float32 accumulator and write partial[k, c].
    """
    # EXERCISE: column and chunk from the block, one accumulator over the chunk's rows
    rows, cols = x.shape
    c = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    k = cuda.blockIdx.y
    if c >= cols:
        return
    start = k * rows_per_chunk
    end = min(start + rows_per_chunk, rows)
    acc = float32(0.0)
    for r in range(start, end):
        acc += x[r, c]  # waits for the previous add: ~4 cycles each, and for its own load
    partial[k, c] = acc


@cuda.jit
def colsum_four_acc_kernel(x, rows_per_chunk, partial):
    """The same partial sum with FOUR independent accumulators a0..a3.

    While four rows remain, load x[r, c] .. x[r + 3, c] first, then add one into each accumulator;
    finish the last 0-3 rows into a0; write (a0 + a1) + (a2 + a3). The four adds of a trip must not
    feed each other: that is what lets them (and their loads) overlap.
    """
    # EXERCISE: four accumulators, four loads then four adds a trip, a tail loop, combine
    rows, cols = x.shape
    c = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    k = cuda.blockIdx.y
    if c >= cols:
        return
    start = k * rows_per_chunk
    end = min(start + rows_per_chunk, rows)
    a0 = float32(0.0)
    a1 = float32(0.0)
    a2 = float32(0.0)
    a3 = float32(0.0)
    r = start
    while r + 3 < end:
        # Four loads with no dependence between them go out back to back; each add then only waits
        # for its own load and its own chain.
        v0 = x[r, c]
        v1 = x[r + 1, c]
        v2 = x[r + 2, c]
        v3 = x[r + 3, c]
        a0 += v0
        a1 += v1
        a2 += v2
        a3 += v3
        r += 4
    while r < end:  # at most three rows left
        a0 += x[r, c]
        r += 1
    partial[k, c] = (a0 + a1) + (a2 + a3)


@cuda.jit
def colsum_finalize_kernel(partial, out):
    chunks, cols = partial.shape
    c = cuda.grid(1)
    if c >= cols:
        return
    acc = float32(0.0)
    for k in range(chunks):
        acc += partial[k, c]
    out[c] = acc


_SIG = "void(float32[:, ::1], int64, float32[:, ::1])"
_FIN = (colsum_finalize_kernel, "void(float32[:, ::1], float32[::1])")
KERNELS = {
    "naive": (colsum_one_acc_kernel, _SIG),
    "naive.finalize": _FIN,
    "optimized": (colsum_four_acc_kernel, _SIG),
    "optimized.finalize": _FIN,
}


def _check(x):
    launch.check_array("x", x, dtype=np.float32, ndim=2)
    if x.size == 0:
        raise ValueError(f"x: expected at least one row and one column, got shape {tuple(x.shape)}")


def _chunks(rows: int, cols: int) -> tuple[int, int]:
    """(number of row chunks, rows per chunk): enough blocks to fill the GPU about eight times over."""
    col_blocks = launch.blocks(cols, THREADS)
    want = max(1, launch.sm_count() * 8 // col_blocks)
    chunks = max(1, min(want, rows // MIN_ROWS_PER_CHUNK, rows))
    per_chunk = -(-rows // chunks)
    return -(-rows // per_chunk), per_chunk


def _column_sums(kernel, x):
    _check(x)
    (d_x,) = launch.to_device(x)
    rows, cols = x.shape
    chunks, per_chunk = _chunks(rows, cols)
    partial = launch.empty((chunks, cols), np.float32)  # (chunks, cols)
    out = launch.empty((cols,), np.float32)
    kernel[(launch.blocks(cols, THREADS), chunks), THREADS](d_x, per_chunk, partial)
    colsum_finalize_kernel[launch.blocks(cols, THREADS), THREADS](partial, out)
    return launch.result(out, x)


def naive(x):
    return _column_sums(colsum_one_acc_kernel, x)


def optimized(x):
    return _column_sums(colsum_four_acc_kernel, x)


def library(x):
    """The same sums through CuPy's reduction (a row of the benchmark table)."""
    import cupy

    return cupy.asarray(x).sum(axis=0)
