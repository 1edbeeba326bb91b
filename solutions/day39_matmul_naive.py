"""Day 39: matrix multiply, step 1 (naive) -- C = A B, A (M, K), B (K, N), C (M, N), float32, row-major.

The problem of the whole unit (days 39-48 import it from here): make_inputs, reference, traffic,
check_inputs, the tolerance and library (cuBLAS FP32 through cupy.matmul). Every later day adds one
step and keeps the earlier ones as rows of its table, SGEMM_CUDA-style: step, TFLOP/s, % of cuBLAS.

v1 naive      one thread per output in (32, 8) blocks with threadIdx.x walking the ROWS of C:
              i, j = cuda.grid(2). The 32 lanes of a warp own rows i..i+31 of one column j, so each
              load of a[i, k] touches 32 rows K * 4 bytes apart (32 sectors a request, 4 useful bytes
              in each), b[k, j] is one address for the whole warp (a broadcast), and the store of c
              writes down a column of C (32 sectors a request). Day 40 swaps the two indices.

Napkin math: 2MNK FLOPs on 4(MK + KN + MN) bytes: at 4096^3 that is 137 GFLOP on 201 MB, 683 FLOPs a
byte, forty times the H200's ridge (~67 TFLOP/s FP32 over ~4.2 TB/s = 16 FLOPs a byte): a GEMM is
compute-bound if the bytes are reused on chip. The naive kernel reuses nothing on purpose: every
multiply-add issues two 4-byte loads (0.25 FLOPs per byte requested from L1), and every A load asks
for 32 sectors (1024 bytes) to deliver 128. It lives or dies by the L1 keeping a warp's 32 rows of A
(32 x 128-byte lines) between consecutive k. cuBLAS FP32 on the H200 is about 51 TFLOP/s; SGEMM_CUDA's
naive kernel reached 1.3 % of cuBLAS on an A6000. At 4096^3 this version takes a while (up to about a
second a call): the benchmark's 30 repetitions of it take tens of seconds.
"""

import math

import numpy as np

from course import cuda, launch
from numba import float32  # numba names only after the course import

TITLE = "Matrix multiply 1: naive (one thread per output)"
MEMORY_SPACE = "global"
VERSIONS = ("naive",)  # the unit's table starts with one row (and cuBLAS); day 40 adds the second
# (M, N, K): one element; a row times a column; a single row and a single column of C; primes
# around a warp and a tile (K past 32: two 32-wide k tiles on day 41); tile-aligned last (the traffic
# counts are read at the last size: whole warps, rows of C on sector boundaries).
TEST_SIZES = ((1, 1, 1), (1, 1, 67), (1, 37, 5), (33, 1, 40), (33, 35, 37), (64, 64, 64))
# 4096^3 (137 GFLOP, 201 MB: three times the 60 MB L2) and the awkward shape, no side a
# multiple of any tile. n is an int (square) or (M, N, K).
BENCH_SIZES = (4096, (4093, 4099, 1021))
BOUND = "compute"  # the benchmark's peak: cuBLAS FP32 GEMM measured in the same run

BLOCK = (32, 8)  # 256 threads: x (a warp) along the rows of C here, along the columns from day 40
MAX_GRID_Y = 65535  # CUDA's limit on gridDim.y: the kernels stride over y past it

# Tolerance. A float32 dot product of K terms, summed one after another, rounds at every add: the
# errors are a random walk of K steps of about 2^-24 of the running sum, so they grow like
# sqrt(K) * 2^-24 of the output's scale (measured: 0.5-0.7 sqrt(K) 2^-24 of max|C| for the sequential
# sum, K from 37 to 4096; cuBLAS's blocked sums land lower). The error is absolute: it comes from the
# partial sums, not from how far the final sum cancels, so every element is held to a share of the
# output's largest magnitude (ERROR_FLOOR = 1: course.checking measures each error against max|C|).
# ACCUMULATION_ULPS = 8 leaves a margin of ten over the measured error; one dropped k term is off by
# |a_ik b_kj| ~ 1/sqrt(K) of the output's scale (inputs below), 0.03 of max|C| at K = 4096 against a
# tolerance of 3e-5: a thousand times over. So a correct kernel passes and a kernel that loses one
# term of one dot product fails, at every K the course runs.
ACCUMULATION_ULPS = 8
UNIT_ROUNDOFF = 2.0**-24  # float32's: half the gap between 1 and the next float


def tolerance(k: int) -> float:
    """Relative tolerance (against max|C|) of a K-long float32 accumulation: 8 sqrt(K) 2^-24, plus
    the two roundings of an exact product (the kernel's and the reference's float32 result)."""
    return (ACCUMULATION_ULPS * math.sqrt(k) + 2) * UNIT_ROUNDOFF


def sizes(n) -> tuple[int, int, int]:
    """(M, N, K) of a problem size: an int n is n^3."""
    return (n, n, n) if isinstance(n, int) else tuple(int(v) for v in n)


# The checking takes one tolerance per day (course.checking): the graders pass tolerance(K) size by
# size; the benchmark, which re-checks every row at BENCH_SIZES, uses the largest K's.
RTOL = tolerance(max(sizes(n)[2] for n in BENCH_SIZES))  # 3.1e-5 at K = 4096
ERROR_FLOOR = 1.0
# The errors are held against max|C|, but a product of a few outputs can cancel towards zero by chance
# (a 1 x 1 x 67 product of 0.003: about one draw in 400), and its rounding errors, which come from
# partial sums of O(1) terms, would then look large. C has unit variance by construction (make_inputs),
# so the scale is never taken below 1 (course.checking).
MIN_SCALE = 1.0


def make_inputs(n, seed: int = 0):
    """A (M, K) and B (K, N) float32, standard normal scaled by K^-1/4 each: every product a_ik b_kj
    has variance 1/K, so every element of C is a sum of K terms with variance 1 (C is O(1) at any K,
    and a dropped term is ~1/sqrt(K) of it)."""
    m, n_cols, k = sizes(n)
    rng = np.random.default_rng(seed)
    scale = np.float32(k**-0.25)
    a = rng.standard_normal((m, k), dtype=np.float32) * scale  # (M, K)
    b = rng.standard_normal((k, n_cols), dtype=np.float32) * scale  # (K, N)
    return a, b


def reference(a, b):
    """The float64 product, rounded once to float32."""
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)  # (M, N)


def traffic(a, b):
    """(minimum bytes through device memory: A and B read once, C written once; FLOPs: 2MNK)."""
    m, k = a.shape
    n = b.shape[1]
    return 4 * (m * k + k * n + m * n), 2 * m * n * k


def check_inputs(a, b) -> None:
    """ValueError unless a (M, K) and b (K, N) are C-contiguous float32 with M, N, K >= 1."""
    launch.check_array("a", a, dtype=np.float32, ndim=2)
    launch.check_array("b", b, dtype=np.float32, ndim=2)
    if b.shape[0] != a.shape[1]:
        raise ValueError(f"b: expected shape ({a.shape[1]}, any): its rows must equal a's columns "
                         f"(K = {a.shape[1]}), got shape {tuple(b.shape)}")
    if 0 in a.shape or b.shape[1] == 0:
        raise ValueError(f"a, b: expected M, N, K >= 1, got a {tuple(a.shape)} and b {tuple(b.shape)}")


@cuda.jit
def matmul_naive_kernel(a, b, c):  # a (M, K), b (K, N), c (M, N)
    """One thread per output, x along the ROWS of C: i, j = cuda.grid(2) (row i, column j) in blocks
    of (32, 8). Guard i < M; columns from j in steps of cuda.gridsize(2)[1] (the grid's y is capped
    at 65535 blocks); each thread sums a[i, k] * b[k, j] over k in a float32 accumulator and stores
    c[i, j] once."""
    # EXERCISE: i, j = cuda.grid(2); guard i < M; stride j over the columns; sum a[i, k] * b[k, j]; store c[i, j]
    m, k_dim = a.shape
    n = b.shape[1]
    i, j = cuda.grid(2)
    step_j = cuda.gridsize(2)[1]
    if i < m:
        while j < n:
            acc = float32(0.0)
            for k in range(k_dim):
                # Lane l reads row i + l: 32 rows K * 4 bytes apart, one sector each; b[k, j] is the
                # same word for all 32 lanes (one sector, broadcast).
                acc += a[i, k] * b[k, j]
            # Down a column of C: 32 sectors for 128 useful bytes, and nothing to merge them in L1.
            c[i, j] = acc
            j += step_j


_SIG = "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])"
KERNELS = {"naive": (matmul_naive_kernel, _SIG)}


def naive(a, b):
    check_inputs(a, b)
    m, n = a.shape[0], b.shape[1]
    d_a, d_b = launch.to_device(a, b)
    c = launch.empty((m, n), np.float32)
    grid = (launch.blocks(m, BLOCK[0]), min(launch.blocks(n, BLOCK[1]), MAX_GRID_Y))
    matmul_naive_kernel[grid, BLOCK](d_a, d_b, c)
    return launch.result(c, a, b)


# The unit's fixed interface: optimized(a, b) is the best step so far. Today that is the only one.
optimized = naive


def run_tiled(kernel, a, b, tile_m: int, tile_n: int, threads):
    """c = a @ b through a kernel that computes one tile_m x tile_n tile of C a block, the tiles on a
    1-D grid (any shape fits its limits): the host side of every tiled step from day 41 on. NumPy in,
    NumPy out; device in, device out."""
    check_inputs(a, b)
    m, n = a.shape[0], b.shape[1]
    d_a, d_b = launch.to_device(a, b)
    c = launch.empty((m, n), np.float32)
    kernel[launch.blocks(m, tile_m) * launch.blocks(n, tile_n), threads](d_a, d_b, c)
    return launch.result(c, a, b)


def library(a, b):
    """cuBLAS FP32 GEMM through CuPy (TF32 off, CuPy's default): the row every step is measured against."""
    import cupy

    return cupy.matmul(cupy.asarray(a), cupy.asarray(b))
