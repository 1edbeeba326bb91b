"""Day 46 exercise: matrix multiply, step 8 (warp tiling) -- C = A B, A (M, K), B (K, N), float32.

The problem is day 39's (imported); the earlier steps are days 39-45's kernels, imported.

v1 naive           day 39: one thread per output, x along the rows of C (32 sectors a request).
v2 coalesced       day 40: one thread per output, x along the columns (a line of B, a broadcast of A).
v3 shared_tiles    day 41: 32 x 32 tiles of A and B in shared memory, two shared loads per FMA.
v4 blocking_1d     day 42: 64 x 64 tiles 8 deep, a column of 8 outputs a thread, 1 + 1/8 loads per FMA.
v5 blocking_2d     day 43: 128 x 128 tiles 8 deep, an 8 x 8 outer product a thread from 16 shared loads.
v6 vectorized      day 44: every access 16 bytes wide, A transposed into shared memory, C out as float4.
v7 double_buffered day 45: A's rows padded to 132 floats (no store conflict), two copies of each tile
                   16 deep, the next step's loads in flight during the compute, one barrier a step.
v8 warp_tiling     day 45's memory pipeline with a third level of tiling between the block and the
                   thread, SGEMM_CUDA's kernel 10: the 128 x 128 block tile is cut into 8 WARP tiles
                   of WM x WN = 64 x 32 (2 warps down, 4 across); a warp walks its tile in
                   WMITER x WNITER = 2 x 2 sub-tiles of 32 x 16, and in each sub-tile lane l owns a
                   TM x TN = 4 x 4 block (lane rows l // 4, lane columns l % 4). A thread still has
                   64 accumulators (8 x 8), but its outputs, and its warp's, are chosen for the
                   shared-memory reads: a warp's 32 lanes read ONE compact 64 x 32 region of C's tile.

What warp tiling changes, napkin math (per warp and kk, 32 lanes x 64 FMAs = 2,048 in both layouts):
  day 45 (thread tiles only): a warp is 2 rows x 16 columns of threads, and each thread's 8 x 8 is
    two 4 x 4 blocks 64 apart, so the warp's 2,048 outputs are 16 rows x 128 columns of the tile: per
    kk it needs 16 values of A and 128 of B, 144 floats (576 bytes). Its A fragment reads are 2 x 2
    distinct float4 (2 x 1 wavefront), its B fragment reads 2 x 16 distinct float4 (2 x 256 bytes,
    2 x 2 wavefronts): 6 wavefronts a kk.
  day 46 (warp tiles): the warp's outputs are one compact 64 x 32 block (two 32 x 16 sub-tiles each
    way), needing 64 values of A and 32 of B a kk, 96 floats (384 bytes): a third fewer distinct
    shared bytes for the same FMAs (0.19 bytes an FMA against 0.28). Per sub-tile the 8 lane rows read
    8 consecutive float4 of A (128 bytes, 1 wavefront) and the 4 lane columns 4 float4 of B (64 bytes,
    1 wavefront): 4 wavefronts a kk. Per 16-deep step and warp: 64 fragment wavefronts + 8 A stores
    (1 each) + 2 B stores (4 each) = 80 for 1,024 warp FMAs, 0.08 a warp FMA (day 45: 96 + 16 = 112,
    0.11; the SM's budget is 0.25: one wavefront a cycle against four warp FMAs). Each float of a
    fragment still feeds 8 FMAs in its thread (4 + 4 values per sub-tile feed 16, 16 a kk feed 64).
    In CUDA C the gain is also in the instruction stream: the fragment addresses of a warp are a
    base plus constants, folded into the ld.shared.v4 immediates; the lane's warp and lane indices
    are computed once.
  The same 128 x 128 x 16 tiles, float4 global loads (16 full sectors a request), padded transposed
  A tile, double buffering and one barrier a step as day 45; the C stores become 8 rows x 64 bytes a
  warp (16 full sectors, as before). Register reuse: 4 + 4 fragment values per sub-tile feed 16 FMAs,
  16 values per kk feed 64. Global side: 32 FLOPs a byte from L2 per block (unchanged).
  Registers: 64 accumulators + 16 fragment values + 16 prefetched floats (2 float4 of A and 2 of B) +
  addresses: `make inspect` (course.compiler) shows ptxas's count, no stack frame and no spills; at
  <= 128 two blocks of 256 threads share an SM (16 warps), above it one. Shared memory: 2 x (16 x 132
  + 16 x 128) x 4 = 33,280 bytes a block, as day 45. SGEMM_CUDA's warp-tiled kernel 10 reached 93.7 %
  of cuBLAS on an A6000 (its kernel 9, autotuned, one level less: 84.8 %). What stops Numba short of
  that: the register allocation is ptxas's (127 here: one more live value above 128 halves the blocks
  an SM; with the loaders' indices recomputed from t + 256 s at every pass it was 148), 64-bit index
  arithmetic for every array access (Numba's intp), the kk loop left rolled, and no ldmatrix /
  cp.async (the prefetch goes through 16 registers).
  Measured on the H200 (make bench, cuBLAS FP32 in the same run): 3.99 ms at 4096^3, 34.4 TFLOP/s,
  67.2 % of cuBLAS's 2.68 ms; 1.109 ms at 4093 x 4099 x 1021, 30.9 TFLOP/s, 68.5 % of cuBLAS's
  0.759 ms at that shape. NOT faster than day 45 (3.97 and 1.084 ms in the same run: 0.99x and
  0.98x): at 127 registers it keeps day 45's two blocks an SM, and the third of the shared
  wavefronts it saves was not the limit (day 45 used under half of shared memory's rate); the loop is
  bound by instruction issue, with day 45's 4 float4 loads and 64 FMAs a kk. Nsight Compute: not
  measured yet. Day 48's sweep tries other points of this kernel's space. C is bit-identical to
  cuBLAS FP32 at both shapes (one sequential FMA chain over k in order an output, no split-K).

Every tile parameter is a module constant (BM, BN, BK, WM, WN, WMITER, WNITER, TM, TN), the others
are derived, and the asserts below tie them together: day 48 sweeps them (tools/sweep.py rewrites
the constants and reloads the module), so the kernel is written for any legal setting.
Edges as days 44-45: A and B padded to rows of 4 floats (pad_columns), zeros loaded past M, K and N4,
C stored as float4 only where a whole tile has 16-byte-aligned rows.

What you write (each raises NotImplementedError with its hint until you do):
  matmul_warp_tiling_kernel  prologue + sync; a step: prefetch next, warp/lane-tiled float4 fragments, outer
                             product, store, sync (124 lines)
Everything else in this file is given. Grade with:  make check DAY=46
"""


from course import cuda, wide
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
    sizes,
    tolerance,
    traffic,
)
from solutions.day44_matmul_vectorized import pad_columns, pad_columns_kernel, run_padded  # noqa: F401
from solutions.day45_matmul_double_buffering import KERNELS as _DAY45_KERNELS
from solutions.day45_matmul_double_buffering import (  # noqa: F401  (steps 1-7: rows of the table)
    blocking_1d,
    blocking_2d,
    coalesced,
    double_buffered,
    naive,
    shared_tiles,
    vectorized,
)

TITLE = "Matrix multiply 8: warp tiling"
MEMORY_SPACE = "shared + register"
VERSIONS = ("naive", "coalesced", "shared_tiles", "blocking_1d", "blocking_2d", "vectorized",
            "double_buffered", "warp_tiling")

# The knobs (day 48 sweeps them): block tile, warp tile, sub-tiles a warp, thread tile a sub-tile.
BM = 128  # rows of C a block
BN = 128  # columns of C a block
BK = 16  # k a step (day 45's): two float4 of A and two of B a thread in flight during the compute
WM = 64  # rows of C a warp: BM // WM = 2 warps down the block tile
WN = 32  # columns of C a warp: BN // WN = 4 warps across
WMITER = 2  # sub-tiles down a warp tile: WM // WMITER = 32 rows each
WNITER = 2  # sub-tiles across a warp tile: WN // WNITER = 16 columns each
TM = 4  # rows of a thread's block in a sub-tile: one float4 of the A fragment
TN = 4  # columns of a thread's block in a sub-tile: one float4 of the B fragment

# Derived: the shapes every loop of the kernel runs over (compile-time constants for Numba).
VEC = wide.WIDTH  # 4 floats: 16 bytes an access
WARP = 32
WARPS_M = BM // WM  # 2 warp tiles down a block tile
WARPS_N = BN // WN  # 4 across
THREADS = WARP * WARPS_M * WARPS_N  # 256 threads a block
WSUBM = WM // WMITER  # 32 rows a sub-tile
WSUBN = WN // WNITER  # 16 columns a sub-tile
LANES_N = WSUBN // TN  # 4 lanes across a sub-tile: lane column l % 4
LANES_M = WSUBM // TM  # 8 lanes down: lane row l // 4
ROWS_OUT = WMITER * TM  # 8 rows of outputs a thread (its A fragment a kk)
COLS_OUT = WNITER * TN  # 8 columns (its B fragment)
OUTPUTS = ROWS_OUT * COLS_OUT  # 64 accumulators a thread
A_STRIDE = BM + VEC  # 132 floats a row of the transposed A tile: 16-byte rows, conflict-free stores
A_COPY = BK * A_STRIDE  # floats of one copy of the (BK, A_STRIDE) A tile
B_COPY = BK * BN  # floats of one copy of the (BK, BN) B tile
A_SHARED = 2 * A_COPY  # two copies (cuda.shared.array needs the size as one constant)
B_SHARED = 2 * B_COPY
A_PASSES = BM * BK // VEC // THREADS  # 2 float4 of the A tile a thread a step
B_PASSES = BK * BN // VEC // THREADS  # 2 float4 of the B tile a thread a step
B_QUADS_PER_ROW = BN // VEC  # 32 float4 in a row of the B tile
A_ROW_PASSES = max(1, 2 * BM // THREADS)  # passes down the A tile before the next 8 k (1 at 256 threads)
A_ROW_STEP = THREADS // 2  # rows between those passes
A_K_STEP = 2 * VEC * max(1, THREADS // (2 * BM))  # k between passes across the A tile: 8
B_K_STEP = THREADS // B_QUADS_PER_ROW  # rows of the B tile between passes: 8
PREFETCH_A = A_PASSES * VEC  # 8 floats of A a thread carries across the outer products
PREFETCH_B = B_PASSES * VEC  # 8 floats of B

assert BM % WM == 0 and BN % WN == 0 and WM % WMITER == 0 and WN % WNITER == 0
assert TM % VEC == 0 and TN % VEC == 0, "fragments are read as float4"
assert LANES_M * LANES_N == WARP and LANES_M * TM == WSUBM and LANES_N * TN == WSUBN, (
    "a sub-tile is exactly one warp's 32 lanes of TM x TN blocks")
assert THREADS <= 1024 and OUTPUTS <= 128, "a block of at most 1024 threads; accumulators must fit registers"
assert BM % 16 == 0 and BK % 8 == 0, "A loader: a warp reads 16 rows x 2 float4 (32 bytes) of A"
assert A_PASSES * VEC * THREADS == BM * BK and B_PASSES * VEC * THREADS == BK * BN, "whole float4 passes"
assert THREADS % (2 * BM) == 0 or (2 * BM) % THREADS == 0, "A loader: each pass a constant offset"
assert THREADS % B_QUADS_PER_ROW == 0, "B loader: each pass whole rows of the B tile"
assert (A_STRIDE * 4) % 16 == 0 and (VEC * A_STRIDE) % 32 == 16  # aligned rows; k 4 apart -> banks 16 apart


@cuda.jit(device=True, inline=True)
def tile_coords(block, tiles_m, tiles_n):
    """(tile row, tile column) of the tile of C that block ``block`` computes: tile columns fastest,
    so consecutive blocks share a row panel of A in L2. Day 54 compiles the kernel again with another
    order in its place (course.days.with_globals)."""
    tr = block // tiles_n
    return tr, block - tr * tiles_n


@cuda.jit
def matmul_warp_tiling_kernel(a, b, c):  # a (M, K4), b (K4, N4), c (M, N); K4, N4 multiples of 4
    """One block of THREADS = 256 threads per BM x BN = 128 x 128 tile of C, the tiles on a 1-D grid
    (tr, tc = tile_coords(cuda.blockIdx.x, ceil(M / BM), ceil(N / BN)): tile columns fastest), BK = 16 deep k steps,
    a and b padded to rows of a multiple of 4 floats (a.shape[1] = K4, b.shape[1] = N4; b keeps its K
    rows), c (M, N). Every global access is a float4 (course.wide).

    Warp tiling. warp, lane = divmod(t, 32); warp_row, warp_col = divmod(warp, BN // WN) (2 x 4 warps);
    lane_row, lane_col = divmod(lane, WSUBN // TN) (8 x 4 lanes). The thread's outputs, for sub-tiles
    wm < WMITER, wn < WNITER and i < TM, j < TN, are
        row = 128 tr + WM warp_row + WSUBM wm + TM lane_row + i,
        col = 128 tc + WN warp_col + WSUBN wn + TN lane_col + j,
    held in acc[(TM wm + i) * COLS_OUT + TN wn + j] (64 registers: constant indices only).

    Shared memory, two copies of each tile (double buffering, as day 45):
      a_tile = cuda.shared.array(A_SHARED, float32, alignment=16):
          copy p, element (k, row) at p * A_COPY + k * A_STRIDE + row
      b_tile = cuda.shared.array(B_SHARED, float32, alignment=16):
          copy p, element (k, col) at p * B_COPY + k * BN + col
    (alignment=16: float4 accesses to a shared array need it; Numba's default is the element's 4.)
    Loaders (256 threads): A's float4 of pass s (s < A_PASSES) is row (t // 2) % BM, k 4 (t % 2) + 8 s
    of the step (a warp: 16 rows x 32 bytes), stored transposed (4 words); B's is row t // (BN / 4)
    + 8 s, column 4 (t % (BN / 4)), stored as one float4 (other thread counts: A_ROW_PASSES,
    A_ROW_STEP, A_K_STEP, B_K_STEP). Zeros past M, K4 (A), K (B) or N4.

      prologue: load step 0 into registers, store it into copy 0, cuda.syncthreads()
      for each k step (copy p):
        1. the next step's float4 loads into registers (zeros past the end)
        2. for kk < BK: a_frag[TM wm + i] = A tile (kk, WM warp_row + WSUBM wm + TM lane_row + i) and
           b_frag[TN wn + j] = B tile (kk, WN warp_col + WSUBN wn + TN lane_col + j), read as float4;
           then acc += the 8 x 8 outer product of a_frag and b_frag
        3. if there is a next step: store the registers into copy 1 - p
        4. cuda.syncthreads()  (the only barrier of the loop)
    Store: a whole tile with N % 4 == 0 as float4 rows (no guards); otherwise element by element,
    rows past M and columns past N skipped. Two separate loops (one loop holding both paths is not
    unrolled, and the accumulators would go to the stack).
    """
    raise NotImplementedError("Day 46: prologue + sync; a step: prefetch next, warp/lane-tiled float4 fragments, outer "
                              "product, store, sync (124 lines)")


_SIG = "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])"
KERNELS = {
    **_DAY45_KERNELS,
    "warp_tiling": (matmul_warp_tiling_kernel, _SIG),
    "warp_tiling.pad": (pad_columns_kernel, "void(float32[:, ::1], float32[:, ::1])"),
}


def warp_tiling(a, b):
    return run_padded(matmul_warp_tiling_kernel, a, b, BM, BN, THREADS)


# The unit's fixed interface: optimized(a, b) is the best step so far.
optimized = warp_tiling
