"""Day 45 exercise: matrix multiply, step 7 (bank conflicts, double buffering) -- C = A B, A (M, K), B (K, N), float32.

The problem is day 39's (imported); the earlier steps are days 39-44's kernels, imported.

v1 naive           day 39: one thread per output, x along the rows of C (32 sectors a request).
v2 coalesced       day 40: one thread per output, x along the columns (a line of B, a broadcast of A).
v3 shared_tiles    day 41: 32 x 32 tiles of A and B in shared memory, two shared loads per FMA.
v4 blocking_1d     day 42: 64 x 64 tiles 8 deep, a column of 8 outputs a thread, 1 + 1/8 loads per FMA.
v5 blocking_2d     day 43: 128 x 128 tiles 8 deep, an 8 x 8 outer product a thread from 16 shared loads.
v6 vectorized      day 44: every access 16 bytes wide, A transposed into shared memory, C out as float4.
v7 double_buffered day 44's kernel with two changes: (1) the transposed A tile's rows padded to
                   BM + 4 = 132 floats, so its store has no bank conflict; (2) two copies of each tile
                   in shared memory, 16 deep: the global loads of the NEXT k step are issued into
                   registers before the outer products of this one, stored into the other copy after
                   them, and one cuda.syncthreads() a k step instead of two.

(1) Bank conflicts. Day 44's thread t stores its float4 of A (row t // 2, k = 4 (t % 2) .. + 3)
transposed: word (4 (t % 2) + j) * 128 + t // 2. Lanes t and t + 1 (one row, k 4 apart) hit words
4 x 128 = 512 apart: one bank (512 mod 32 = 0). A warp's 32 words fall on 16 banks, 2 each: every
one of the 4 stores is 2 wavefronts. With rows 132 floats long, 4 x 132 = 528 = 16 (mod 32): the even
lanes take banks 0-15, the odd ones 16-31, one wavefront a store. 132 floats is 528 bytes, a multiple
of 16, so every row still starts 16-byte aligned and the float4 fragment loads a_tile[kk * 132 +
4 ty + 64 h : +4] stay legal (a pad of 1, day 21's, would break them). The cost: 4 x 16 x 4 = 256
bytes of shared memory a copy. (An XOR swizzle, column ^ f(k), gets the same with no padding, but
every fragment load then needs the swizzle too.) A 16-deep tile keeps the mapping conflict-free:
thread t loads k = 4 (t % 2) and 4 (t % 2) + 8 of its row (a warp still reads 16 rows x 32 bytes a
request, 16 full sectors), not 4 consecutive float4 (lanes 4 apart in k would then pair up on banks
again: 4 x 132 x 2 = 0 mod 32, 2-way even with the pad).

(2) Double buffering. Day 44 waits at every k step: the loads of a tile must land (~600-800 cycles
from L2/HBM) before any warp can compute on it, and with 2 blocks an SM there is one other block to
run meanwhile. Here each thread issues the next step's 4 float4 global loads first: they are in
flight while the warp does its 16 x 64 = 1,024 FMAs (at 4 warp FMAs a cycle per SM and 16 warps an
SM, ~4,000 cycles: enough to cover them); after the outer products it stores them into the other
copy. One barrier a step is enough: step s reads copy s % 2 and writes copy (s + 1) % 2; the only
conflicts are (a) the reads of step s + 1 against the writes of step s into its copy, and (b) the
writes of step s against the reads of step s - 1 of the same copy; the barrier at the end of step s
separates (a), the barrier at the end of step s - 1 separates (b) (every thread finished step s - 1's
reads before any thread passes it). The first tile is loaded and stored before the loop (a
prologue, with its own barrier). 16 deep instead of 8 halves the barriers and the loop overhead
again: one barrier per 16 kk where day 44 had two per 8, a quarter as many.

Napkin math: per warp and 16 kk: 1,024 FMAs, 64 float4 fragment loads (A 1 wavefront, B 2), 8 A
stores (1 wavefront each, day 44: 2) and 2 B stores (4): 96 + 8 + 8 = 112 wavefronts against day 44's
96 + 16 + 8 = 120 (the simulator counts exactly these), 0.11 wavefronts a warp FMA: under half of the
SM's shared bandwidth (1 wavefront a cycle against 4 warp FMAs). Registers: 64 accumulators + 16
fragment values + 16 prefetched floats (day 44 had no values live across the compute): ptxas
allocates 125 (day 44: 116; make inspect: no stack, no spills), so two blocks of 256 threads still fit
an SM, 16 warps, as on day 44. Shared memory: 2 x (16 x 132 + 16 x 128) x 4 = 33,280 bytes a block,
67 KB for two of the 228 KB an SM. BK = 8 would keep fewer registers and half the shared memory, but
then the loads in flight cover only 512 FMAs a warp and the barrier comes twice as often; 16 fits in
the registers two blocks an SM allow, so 16 it is. SGEMM_CUDA's bank-conflict kernels (7, 8) and its
autotuned kernel 9 (BK = 16) took it from 78.4 % to 84.8 % of cuBLAS on an A6000 (its double-buffered
kernels, 11-12, come after warp tiling): a step of ~10 % is the napkin math's expectation here too
(the rest of the gap is the warp layout and Numba's index arithmetic, day 46). Edges as day 44: A and
B padded to rows of 4 floats (pad_columns), zeros loaded past M, K and N4, C stored as float4 only
where a whole tile has 16-byte-aligned rows.

Measured on the H200 (make bench, cuBLAS FP32 in the same run): 3.97 ms at 4096^3, 34.6 TFLOP/s,
67.4 % of cuBLAS's 2.68 ms, 1.10x day 44's 4.35 ms; 1.08 ms at 4093 x 4099 x 1021, 31.6 TFLOP/s,
70 % of cuBLAS's 0.76 ms at that shape, 1.08x day 44's 1.18 ms: the ~10 % expected, and the unit's
best FP32 kernel (its target: >= 60 % of cuBLAS at 4096^3; day 46's warp layout does not beat it:
3.99 ms). C is bit-identical to cuBLAS FP32 at both shapes: one sequential FMA chain over k in order
an output, as cuBLAS's (no split-K).

What you write (each raises NotImplementedError with its hint until you do):
  matmul_double_buffered_kernel  step 0 into copy 0, sync; a step: next loads to registers, outer products, store to
                                 1 - p, sync (95 lines)
Everything else in this file is given. Grade with:  make check DAY=45
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
from solutions.day43_matmul_2d_blocking import BM, BN, OUTPUTS, TM, TN, THREADS_2D
from solutions.day44_matmul_vectorized import (  # noqa: F401  (steps 1-6: rows of the table)
    A_QUADS_PER_ROW,
    B_QUADS_PER_ROW,
    HALF,
    QUADS,
    VEC,
    blocking_1d,
    blocking_2d,
    coalesced,
    naive,
    pad_columns,
    run_padded,
    pad_columns_kernel,
    shared_tiles,
    vectorized,
)
from solutions.day44_matmul_vectorized import KERNELS as _DAY44_KERNELS

TITLE = "Matrix multiply 7: bank conflicts and double buffering"
MEMORY_SPACE = "shared + register"
VERSIONS = ("naive", "coalesced", "shared_tiles", "blocking_1d", "blocking_2d", "vectorized", "double_buffered")

BK = 16  # k a step (day 44: 8): a quarter of day 44's barriers, 16 floats a thread in flight
A_STRIDE = BM + VEC  # 132 floats a row of the transposed A tile: 4 x 132 = 16 (mod 32) banks, 16-byte rows
A_COPY = BK * A_STRIDE  # floats of one copy of the (BK, 132) A tile
B_COPY = BK * BN  # floats of one copy of the (BK, 128) B tile
A_TILES = 2 * A_COPY  # both copies (a global: cuda.shared.array needs a constant shape)
B_TILES = 2 * B_COPY
PASS_K = A_QUADS_PER_ROW * VEC  # 8: a thread's second float4 of A is 8 k further on, of B 8 rows down
PASSES = BK // PASS_K  # 2 float4 of each tile a thread a step
PREFETCH = PASSES * VEC  # 8 floats of A and 8 of B a thread carries across the outer products
assert PASSES * VEC * THREADS_2D == BM * BK == BK * BN
assert THREADS_2D // B_QUADS_PER_ROW == PASS_K
assert (A_STRIDE * 4) % 16 == 0 and (VEC * A_STRIDE) % 32 == 16  # aligned rows; lanes t, t + 1 on other banks


@cuda.jit
def matmul_double_buffered_kernel(a, b, c):  # a (M, K4), b (K4, N4), c (M, N); K4, N4 multiples of 4
    """Day 44's kernel (one block of 256 threads per 128 x 128 tile of C on a 1-D grid, tile columns
    fastest; thread t, ty, tx = divmod(t, 16), owns c[128 tr + 4 ty + r + 64 h, 128 tc + 4 tx + q + 64 w];
    float4 fragments, 64 accumulators; the same two store loops for C) with 16-deep k steps, a padded A
    tile and two copies of each tile:

      a_tile = cuda.shared.array(A_TILES, float32, alignment=16): copy p (of 2), element (k, row)
               at p * A_COPY + k * 132 + row
      b_tile = cuda.shared.array(B_TILES, float32, alignment=16): copy p (of 2), element (k, col)
               at p * B_COPY + k * 128 + col

    (alignment=16: float4 accesses to a shared array need it; Numba's default is the element's 4.)

    Per k step a thread loads two float4 of A, a[128 tr + t // 2, k0 + 4 (t % 2) + 8 s : +4] (s = 0, 1),
    and two of B, b[k0 + t // 32 + 8 s, 128 tc + 4 (t % 32) : +4], zeros past M, K4 (A), K (B) or N4,
    into registers (cuda.local.array, constant indices only), then stores A's transposed (4 words at
    (4 (t % 2) + 8 s + j) * 132 + t // 2) and B's as float4 at (t // 32 + 8 s) * 128 + 4 (t % 32).

      prologue: load step 0, store it into copy 0, cuda.syncthreads()
      for each k0 = 0, 16, ... < K4, p = (k0 / 16) % 2:
        1. load step k0 + 16 into registers (every load guarded: at the last step all are zeros)
        2. for kk in range(16): fragments from copy p (A's at kk * 132 + 4 ty + 64 h), outer product
        3. if k0 + 16 < K4: store the registers into copy 1 - p
        4. cuda.syncthreads()  (the only barrier of the loop)
    """
    raise NotImplementedError("Day 45: step 0 into copy 0, sync; a step: next loads to registers, outer products, "
                              "store to 1 - p, sync (95 lines)")


_SIG = "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])"
KERNELS = {
    **_DAY44_KERNELS,
    "double_buffered": (matmul_double_buffered_kernel, _SIG),
    "double_buffered.pad": (pad_columns_kernel, "void(float32[:, ::1], float32[:, ::1])"),
}


def double_buffered(a, b):
    return run_padded(matmul_double_buffered_kernel, a, b, BM, BN, THREADS_2D)


# The unit's fixed interface: optimized(a, b) is the best step so far.
optimized = double_buffered
