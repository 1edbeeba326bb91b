"""Day 40: matrix multiply, step 2 (global coalescing) -- C = A B, A (M, K), B (K, N), float32.

The problem is day 39's (make_inputs, reference, traffic, check_inputs, tolerance, library: imported).
Each step keeps the earlier ones as rows of its table.

v1 naive      day 39's kernel, imported: x along the ROWS of C, so a warp reads 32 rows of A
              (32 sectors a request) and writes down a column of C (32 sectors a store).
v2 coalesced  the same one thread per output with the two indices swapped, j, i = cuda.grid(2):
              x walks the COLUMNS of C. A warp is 32 consecutive columns of one row, so b[k, j..j+31]
              is one 128-byte line (4 sectors), a[i, k] is one word for the whole warp (a broadcast,
              1 sector), and the store writes a row of C (4 sectors).

Napkin math: the arithmetic has not changed (2MNK FLOPs, two 4-byte loads per multiply-add), but
the sectors it asks for have: per k a warp now requests 1 + 4 = 5 sectors (160 bytes) for 32
multiply-adds instead of 32 + 1 = 33 (1056 bytes), 6.6x fewer, and every byte of B it gets is used.
Per block of (32, 8) threads the 8 warps read the same line of B at each k (8-fold reuse in L1)
and 8 rows of A. What binds is the load instruction rate: every multiply-add still needs two
loads through L1 (one a broadcast), so at most a few TFLOP/s against cuBLAS FP32's ~51 on the H200.
SGEMM_CUDA's coalesced kernel reached 8.5 % of cuBLAS on an A6000 (6.5x its naive kernel).
"""

import numpy as np

from course import cuda, launch
from numba import float32  # numba names only after the course import
from solutions.day39_matmul_naive import (  # noqa: F401  (the unit's problem: graders and bench read these)
    BENCH_SIZES,
    BLOCK,
    BOUND,
    ERROR_FLOOR,
    MIN_SCALE,
    MAX_GRID_Y,
    RTOL,
    TEST_SIZES,
    check_inputs,
    library,
    make_inputs,
    naive,
    reference,
    sizes,
    tolerance,
    traffic,
)
from solutions.day39_matmul_naive import KERNELS as _DAY39_KERNELS

TITLE = "Matrix multiply 2: global coalescing"
MEMORY_SPACE = "global"
VERSIONS = ("naive", "coalesced")  # one row more than day 39; `optimized` is the last of them


@cuda.jit
def matmul_coalesced_kernel(a, b, c):  # a (M, K), b (K, N), c (M, N)
    """One thread per output, x along the COLUMNS of C: j, i = cuda.grid(2) (column j, row i) in
    blocks of (32, 8). Guard j < N; rows from i in steps of cuda.gridsize(2)[1] (the grid's y is
    capped at 65535 blocks); each thread sums a[i, k] * b[k, j] over k in a float32 accumulator and
    stores c[i, j] once. Day 39's kernel with the two indices swapped."""
    # EXERCISE: j, i = cuda.grid(2); guard j < N; stride i over the rows; sum a[i, k] * b[k, j]; store c[i, j]
    m, k_dim = a.shape
    n = b.shape[1]
    j, i = cuda.grid(2)
    step_i = cuda.gridsize(2)[1]
    if j < n:
        while i < m:
            acc = float32(0.0)
            for k in range(k_dim):
                # a[i, k]: one word for all 32 lanes (1 sector, broadcast); b[k, j]: 32 consecutive
                # floats of row k of B, one 128-byte line (4 sectors), shared by the block's 8 warps.
                acc += a[i, k] * b[k, j]
            # A row of C: 32 consecutive floats, 4 sectors a store.
            c[i, j] = acc
            i += step_i


_SIG = "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])"
KERNELS = {**_DAY39_KERNELS, "coalesced": (matmul_coalesced_kernel, _SIG)}


def coalesced(a, b):
    check_inputs(a, b)
    m, n = a.shape[0], b.shape[1]
    d_a, d_b = launch.to_device(a, b)
    c = launch.empty((m, n), np.float32)
    grid = (launch.blocks(n, BLOCK[0]), min(launch.blocks(m, BLOCK[1]), MAX_GRID_Y))
    matmul_coalesced_kernel[grid, BLOCK](d_a, d_b, c)
    return launch.result(c, a, b)


# The unit's fixed interface: optimized(a, b) is the best step so far.
optimized = coalesced
