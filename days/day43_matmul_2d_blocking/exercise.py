"""Day 43 exercise: matrix multiply, step 5 (2-D register blocking) -- C = A B, A (M, K), B (K, N), float32.

The problem is day 39's (imported); the earlier steps are days 39-42's kernels, imported.

v1 naive         day 39: one thread per output, x along the rows of C (32 sectors a request).
v2 coalesced     day 40: one thread per output, x along the columns (a line of B, a broadcast of A).
v3 shared_tiles  day 41: 32 x 32 tiles of A and B in shared memory, two shared loads per FMA.
v4 blocking_1d   day 42: 64 x 64 tiles 8 deep, a column of 8 outputs a thread, 1 + 1/8 loads per FMA.
v5 blocking_2d   a block of 256 threads per 128 x 128 tile of C (a 1-D grid of tiles, tile columns
                 fastest), 8-deep tiles of A (128 x 8) and B (8 x 128) in shared memory, four elements
                 of each a thread per k step. Each thread computes an 8 x 8 block of outputs (rows
                 t // 16 + 16 i, columns t % 16 + 16 j) as 8 rank-1 updates a k step: per kk it loads
                 8 values of A and 8 of B from shared memory into register fragments and does their
                 8 x 8 outer product, 64 FMAs on 64 register accumulators.

Napkin math: per kk a thread does TM TN = 64 FMAs for TM + TN = 16 shared loads, 1/TM + 1/TN = 0.25
loads per FMA (day 42: 1.125, day 41: 2). Outputs 16 apart (not 8 consecutive) keep every load one
wavefront: a warp is 16 consecutive columns of 2 rows, so the B fragment reads 16 consecutive words
(each twice: a broadcast) and the A fragment 2 words 8 banks apart. An SM serves one wavefront a cycle
against four warp FMAs: 0.25 wavefronts a warp FMA is exactly the balance, so shared memory no longer
caps the kernel below the FP32 peak (~60 TFLOP/s on the H200); the issue rate does: 16 loads and 64
FMAs a kk, plus the tile loads, index arithmetic and two barriers per 8 kk, so at most ~80 % of the
peak from the inner loop alone, and less with the ~25 % occupancy the registers allow. Global side:
(128 + 128) x 8 floats per 128 x 128 x 8 FMAs, 32 FLOPs per byte from L2 (day 42: 16). Registers:
64 accumulators + 16 fragment values + indices and addresses: ptxas allocates 128 (make inspect: no
stack, no spills; 146 with 2-D tiles, see the kernel), so two blocks of 256 threads an SM: 16 warps,
25 % occupancy, each warp with 64 independent FMAs per kk to cover latency. Shared memory: 8 KB a block. SGEMM_CUDA's
kernel 5 (the same tile sizes, outputs 8 consecutive) reached 68.7 % of cuBLAS on an A6000. Days
44-45 make the shared loads 16 bytes wide and overlap the next tile's global loads with the compute.

What you write (each raises NotImplementedError with its hint until you do):
  matmul_blocking_2d_kernel  per k step load 4 of each tile (0.0 past edges), sync, fragments + outer product a kk,
                             sync; store (55 lines)
Everything else in this file is given. Grade with:  make check DAY=43
"""


from course import cuda
from numba import float32  # numba names only after the course import
from solutions.day39_matmul_naive import (  # noqa: F401  (the unit's problem: graders and bench read these)
    BENCH_SIZES,
    BOUND,
    ERROR_FLOOR,
    MIN_SCALE,
    RTOL,
    TEST_SIZES,
    check_inputs,
    library,
    make_inputs,
    reference,
    run_tiled,
    sizes,
    tolerance,
    traffic,
)
from solutions.day42_matmul_1d_blocking import KERNELS as _DAY42_KERNELS
from solutions.day42_matmul_1d_blocking import (  # noqa: F401  (steps 1-4: rows of the table)
    blocking_1d,
    coalesced,
    naive,
    shared_tiles,
)

TITLE = "Matrix multiply 5: 2-D register blocking"
MEMORY_SPACE = "shared + register"
VERSIONS = ("naive", "coalesced", "shared_tiles", "blocking_1d", "blocking_2d")  # one row more than day 42

BM = 128  # rows of C a block
BN = 128  # columns of C a block
BK = 8  # k a step: tiles of 128 x 8 (A) and 8 x 128 (B), 1024 floats each, 4 a thread
TM = 8  # rows of outputs a thread: the A fragment
TN = 8  # columns of outputs a thread: the B fragment
THREAD_COLS = BN // TN  # 16 threads across a tile: a warp is 16 columns x 2 rows of threads
THREAD_ROWS = BM // TM  # 16 threads down
THREADS_2D = THREAD_ROWS * THREAD_COLS  # 256 threads a block
A_TILE = BM * BK  # floats of the A tile (a flat shared array: see the kernel)
B_TILE = BK * BN
OUTPUTS = TM * TN  # 64 accumulators a thread (a global: cuda.local.array needs a constant shape)
A_ROWS_PER_PASS = THREADS_2D // BK  # 32 rows of the A tile loaded per pass, 4 passes
B_ROWS_PER_PASS = THREADS_2D // BN  # 2 rows of the B tile loaded per pass, 4 passes
LOADS_PER_THREAD = BM * BK // THREADS_2D  # 4 elements of each tile a thread per k step
assert LOADS_PER_THREAD * THREADS_2D == BM * BK == BK * BN


@cuda.jit
def matmul_blocking_2d_kernel(a, b, c):  # a (M, K), b (K, N), c (M, N)
    """One block of 256 threads (1-D) per BM x BN = 128 x 128 tile of C, a 1-D grid of tiles, tile
    columns fastest: tr, tc = divmod(cuda.blockIdx.x, ceil(N / 128)). Thread t, with
    ty, tx = divmod(t, 16), computes the 8 x 8 outputs c[128 tr + ty + 16 i, 128 tc + tx + 16 j],
    i, j = 0..7 (outputs 16 apart: a warp's fragment loads hit distinct banks).

    Registers: acc = cuda.local.array(OUTPUTS, float32) (OUTPUTS = TM TN = 64, acc[i * TN + j]), a_frag =
    cuda.local.array(TM, float32), b_frag = cuda.local.array(TN, float32), indexed only in loops over
    range(TM) / range(TN) (constant trip counts: unrolled, constant indices, no stack frame).
    For each k0 = 0, 8, 16, ... < K:
      1. four passes p = 0..3: A tile element (t // 8 + 32 p, t % 8) = a[128 tr + t // 8 + 32 p,
         k0 + t % 8] and B tile element (t // 128 + 2 p, t % 128) = b[k0 + t // 128 + 2 p,
         128 tc + t % 128], 0.0 wherever the index is past M, N or K (edge tiles: the inner loop
         needs no guard);
      2. cuda.syncthreads();
      3. for kk in range(BK): a_frag[i] = A tile (ty + 16 i, kk), b_frag[j] = B tile (kk, tx + 16 j),
         then acc[i * TN + j] += a_frag[i] * b_frag[j] for all i, j (the outer product);
      4. cuda.syncthreads() (the next step overwrites the tiles).
    Every thread takes part in both barriers; only outputs with row < M and column < N are stored.
    Tiles: flat shared arrays, a_tile = cuda.shared.array(A_TILE, float32) holding the (BM, BK) tile
    row-major (element (r, k) at r * BK + k) and b_tile = cuda.shared.array(B_TILE, float32) the
    (BK, BN) tile (element (k, col) at k * BN + col).
    """
    raise NotImplementedError("Day 43: per k step load 4 of each tile (0.0 past edges), sync, fragments + outer "
                              "product a kk, sync; store (55 lines)")


_SIG = "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])"
KERNELS = {**_DAY42_KERNELS, "blocking_2d": (matmul_blocking_2d_kernel, _SIG)}


def blocking_2d(a, b):
    return run_tiled(matmul_blocking_2d_kernel, a, b, BM, BN, THREADS_2D)


# The unit's fixed interface: optimized(a, b) is the best step so far.
optimized = blocking_2d
