"""Day 41 exercise: matrix multiply, step 3 (shared-memory tiles) -- C = A B, A (M, K), B (K, N), float32.

The problem is day 39's (imported); the earlier steps are days 39 and 40's kernels, imported.

v1 naive         day 39: one thread per output, x along the rows of C (32 sectors a request).
v2 coalesced     day 40: one thread per output, x along the columns (a line of B, a broadcast of A).
v3 shared_tiles  a block of 32 x 32 threads per 32 x 32 tile of C (a 1-D grid of tiles, tile columns
                 fastest). For each 32-wide step along K the block loads a 32 x 32 tile of A and one
                 of B into shared memory, each thread ONE element of each (coalesced: a warp loads a
                 row of each tile), barrier, 32 multiply-adds from the tiles, barrier (nobody
                 overwrites a tile another warp is still reading). Edge tiles are padded with zeros
                 (rows past M, columns past N, k past K), so the inner loop needs no guard.

Napkin math: per tile step a block loads 2 x 32 x 32 floats from global memory and does
32 x 32 x 32 multiply-adds: each element of A and B is fetched once per tile instead of once per
output, 32x fewer global loads: 2 ceil(K / 32) / 32 load requests per output against day 40's
2K / 32. Global bytes: A is read N / 32 times and B M / 32 times, 8 MNK / 32 bytes, 8 FLOPs per
byte from L2 (day 40: ~3 with L1 help, 0.25 without); at 4096^3, 17 GB of L2 traffic, well within
the H200's L2 bandwidth. What binds now is shared memory: every multiply-add still reads two floats
from the tiles (a broadcast of a_tile[ty, kk] and a row of b_tile), two shared wavefronts per warp
FMA instruction, and an SM serves one wavefront a cycle against four warp FMAs: at most 1/8 of the
FP32 peak (~67 TFLOP/s), about 8 TFLOP/s, 16 % of cuBLAS's ~51. SGEMM_CUDA's step reached 12.8 % of
cuBLAS on an A6000. Days 42-43 compute several outputs a thread, so each value read from shared
memory feeds several FMAs from registers.

What you write (each raises NotImplementedError with its hint until you do):
  matmul_shared_tiles_kernel  find the tile; per k step: load an element of each tile (0.0 past M, N, K), sync, 32
                              FMAs, sync; store (29 lines)
Everything else in this file is given. Grade with:  make check DAY=41
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
from solutions.day40_matmul_coalesced import KERNELS as _DAY40_KERNELS
from solutions.day40_matmul_coalesced import coalesced, naive  # noqa: F401  (steps 1 and 2: rows of the table)

TITLE = "Matrix multiply 3: shared-memory tiles"
MEMORY_SPACE = "shared"
VERSIONS = ("naive", "coalesced", "shared_tiles")  # one row more than day 40; `optimized` is the last

TILE = 32  # a warp's width: a tile row is one coalesced 128-byte load, and 32 x 32 threads = 1024
TILE_BLOCK = (TILE, TILE)  # one thread per output of the block's tile of C


@cuda.jit
def matmul_shared_tiles_kernel(a, b, c):  # a (M, K), b (K, N), c (M, N)
    """One block of (32, 32) threads per 32 x 32 tile of C, a 1-D grid of tiles, tile columns fastest:
    tr, tc = divmod(cuda.blockIdx.x, tiles_n) with tiles_n = ceil(N / 32). Thread (tx, ty) owns
    c[i, j] with i = 32 tr + ty, j = 32 tc + tx (x along the columns, as on day 40).

    For each k0 = 0, 32, 64, ... < K:
      1. a_tile[ty, tx] = a[i, k0 + tx] and b_tile[ty, tx] = b[k0 + ty, j]: one element of each tile a
         thread (a warp loads a row of each: coalesced), and 0.0 wherever the index is past M, N or K
         (the edge tiles: zeros add nothing to the sum, so the inner loop needs no guard);
      2. cuda.syncthreads(): the tiles were loaded by all 32 warps;
      3. acc += a_tile[ty, kk] * b_tile[kk, tx] for kk in range(32) (a_tile's word is a broadcast,
         b_tile's row 32 banks: both conflict-free);
      4. cuda.syncthreads(): the next step overwrites tiles that other warps may still be reading.
    Every thread takes part in both barriers (no early return); only threads with i < M and j < N
    store c[i, j]. Tiles are cuda.shared.array((TILE, TILE), float32).
    """
    raise NotImplementedError("Day 41: find the tile; per k step: load an element of each tile (0.0 past M, N, K), "
                              "sync, 32 FMAs, sync; store (29 lines)")


_SIG = "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])"
KERNELS = {**_DAY40_KERNELS, "shared_tiles": (matmul_shared_tiles_kernel, _SIG)}


def shared_tiles(a, b):
    return run_tiled(matmul_shared_tiles_kernel, a, b, TILE, TILE, TILE_BLOCK)


# The unit's fixed interface: optimized(a, b) is the best step so far.
optimized = shared_tiles
