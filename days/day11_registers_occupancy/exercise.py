"""Day 11 exercise: registers and occupancy -- per-column mean and variance of a (64, n) batch.

v1 naive      the fewest registers: one pass with three running values (shifted sums of x - x[0]),
              ~37 registers, 75 % occupancy, grid-stride over columns; but each thread has only the
              few loads the compiler unrolls ahead in flight.
v2 optimized  spend registers on loads in flight: all 64 values of the column are loaded up front into
              registers (72 of them, 37.5 % occupancy) -- 64 independent loads per thread -- then the
              mean and the squared deviations come from registers in two exact passes.

Napkin math: 64 x 4 = 256 bytes read and 8 written per column, ~3 FLOPs a value: memory-bound.
n = 2^22 columns reads 1.07 GB, ~0.26 ms at the H200's ~4.1 TB/s copy rate. Measured on an H200:
naive 416 us (63 % of the copy rate), optimized 268 us (97 %): lower occupancy, more bytes in flight.
`make inspect DAY=11` shows each kernel's registers; occupancy() says what they cost.

What you write (each raises NotImplementedError with its hint until you do):
  occupancy              check the arguments; warps per block; registers per warp rounded up to 256; each limit; the
                         min (19 lines)
  stats_one_pass_kernel  grid-stride over columns, one loop over rows with shifted running sums s and q (15 lines)
  stats_two_pass_kernel  load the column into a local array, mean, then squared deviations from the kept values (15
                         lines)
Everything else in this file is given. Grade with:  make check DAY=11
"""

import math

import numpy as np

from course import cuda, launch  # first: course picks GPU or simulator before numba loads
from numba import float32

TITLE = "Registers and occupancy"
MEMORY_SPACE = "register"
VERSIONS = ("naive", "optimized")
ROWS = 64  # samples per column: a compile-time constant, so the optimized kernel can keep them all live
TEST_SIZES = (1, 255, 257, 1021, 2053)  # columns: one, a block -1 and +1, primes
BENCH_SIZES = (1 << 22,)  # 64 x 4M float32 = 1.07 GB read, ~18x the 60 MB L2
BOUND = "memory"
THREADS = 256

# The H200 (compute capability 9.0): per-SM limits that decide occupancy.
SM_REGISTERS = 65536
SM_MAX_THREADS = 2048
SM_MAX_BLOCKS = 32
SM_SHARED_BYTES = 228 * 1024  # 227 KB usable by one block; 1 KB per block is kept by the system
MAX_REGISTERS_PER_THREAD = 255


def occupancy(registers: int, threads_per_block: int, shared_bytes: int = 0) -> dict:
    """Resident blocks and warps per SM for a kernel, and which resource runs out first.

    Registers are handed out per warp in units of 256 (so a thread's count rounds up to a multiple
    of 8); shared memory per block in units of 128 bytes, plus 1 KB the system keeps per block.
    Each limit (threads, blocks, registers, and shared memory when shared_bytes > 0) allows some
    number of blocks per SM; the smallest wins. Returns {"blocks_per_sm", "warps_per_sm",
    "occupancy" (resident warps / 64), "limited_by" ("threads", "blocks", "registers" or
    "shared memory")}; raises ValueError for threads_per_block outside 1..1024 or registers > 255.
    """
    raise NotImplementedError("Day 11: check the arguments; warps per block; registers per warp rounded up to 256; "
                              "each limit; the min (19 lines)")


def make_inputs(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    # An offset far from zero makes the variance a small difference of large numbers: the shifted
    # sums must keep it accurate (the textbook sum(x^2)/n - mean^2 in float32 would not).
    x = (rng.standard_normal((ROWS, n), dtype=np.float32) * 2 + 10).astype(np.float32)  # (rows, cols)
    return (x,)


def reference(x):
    x64 = x.astype(np.float64)
    return np.stack([x64.mean(axis=0), x64.var(axis=0)]).astype(np.float32)  # (2, cols)


def traffic(x):
    """(minimum bytes moved through device memory, floating-point operations)."""
    return x.nbytes + 2 * x.shape[1] * 4, 4 * x.size


@cuda.jit
def stats_one_pass_kernel(x, out):
    """Grid-stride over columns, keeping only three running values: with k = x[0, c] and
    d = x[r, c] - k, s = sum of d and q = sum of d * d over the rows. Then m = s / rows,
    mean = k + m and variance = q / rows - m * m (the shift by k avoids cancellation when the mean
    is large). out[0, c] = mean, out[1, c] = variance.
    """
    raise NotImplementedError("Day 11: grid-stride over columns, one loop over rows with shifted running sums s and q "
                              "(15 lines)")


@cuda.jit
def stats_two_pass_kernel(x, out):
    """Thread c owns column c (guard c < cols). Copy the ROWS values of the column into
    cuda.local.array(ROWS, float32) with loops of constant trip count (so every index is known at
    compile time and the array lives in registers), sum them for the mean, then sum the squared
    deviations from that mean. out[0, c] = mean, out[1, c] = variance (divide by ROWS).
    """
    raise NotImplementedError("Day 11: load the column into a local array, mean, then squared deviations from the kept "
                              "values (15 lines)")


_SIG = "void(float32[:, ::1], float32[:, ::1])"
KERNELS = {"naive": (stats_one_pass_kernel, _SIG), "optimized": (stats_two_pass_kernel, _SIG)}


def _check(x):
    launch.check_array("x", x, dtype=np.float32, ndim=2, shape=(ROWS, None))


def naive(x):
    _check(x)
    (d_x,) = launch.to_device(x)
    out = launch.empty((2, x.shape[1]), np.float32)
    stats_one_pass_kernel[launch.grid_stride_blocks(x.shape[1], THREADS), THREADS](d_x, out)
    return launch.result(out, x)


def optimized(x):
    _check(x)
    (d_x,) = launch.to_device(x)
    out = launch.empty((2, x.shape[1]), np.float32)
    stats_two_pass_kernel[launch.blocks(x.shape[1], THREADS), THREADS](d_x, out)
    return launch.result(out, x)


def library(x):
    """The same statistics through CuPy's reductions (a row of the benchmark table)."""
    import cupy

    x = cupy.asarray(x)
    return cupy.stack([x.mean(axis=0), x.var(axis=0)])
