"""Day 44: matrix multiply, step 6 (16-byte loads) -- C = A B, A (M, K), B (K, N), float32.

The problem is day 39's (imported); the earlier steps are days 39-43's kernels, imported.

v1 naive         day 39: one thread per output, x along the rows of C (32 sectors a request).
v2 coalesced     day 40: one thread per output, x along the columns (a line of B, a broadcast of A).
v3 shared_tiles  day 41: 32 x 32 tiles of A and B in shared memory, two shared loads per FMA.
v4 blocking_1d   day 42: 64 x 64 tiles 8 deep, a column of 8 outputs a thread, 1 + 1/8 loads per FMA.
v5 blocking_2d   day 43: 128 x 128 tiles 8 deep, an 8 x 8 outer product a thread from 16 shared loads.
v6 vectorized    day 43's tiles and outer product, every memory access 16 bytes wide (course.wide,
                 CUDA C's float4): a thread loads one float4 of the A tile and one of the B tile per
                 k step (day 43: four floats of each), stores A's TRANSPOSED into shared memory
                 (a_tile[k, row]), so the A fragment of a kk is contiguous too, and reads each
                 fragment as two float4 (day 43: 8 + 8 scalar loads); C goes out as float4.
                 A thread's 8 x 8 outputs are two 4 x 4 blocks 64 apart in each direction (rows
                 4 ty + r + 64 h, columns 4 tx + c + 64 w): a warp's float4 fragment loads then
                 cover 256 consecutive bytes of B (2 wavefronts) and 2 float4 of A (a broadcast).

Napkin math: per kk a thread issues 4 shared loads (16 bytes each) for 64 FMAs instead of 16, so
the load/FMA issue ratio drops from 0.25 to 0.06 and the inner loop is almost all FMAs; the global
side issues a quarter of the load instructions of day 43 (each request 512 bytes, 16 full sectors).
A 16-byte access needs a 16-byte-aligned address: rows of A and B whose length is a multiple of 4
floats. Other shapes are padded with zero columns on the device first (pad_columns: A to K4 =
4 ceil(K / 4) columns, B to N4 columns): at 4093 x 4099 x 1021 that copies 33 MB (~15 us at 4.2 TB/s
against the 1.17 ms the whole call measures on the H200), at 4096^3 nothing. C keeps its shape: it
is stored as float4 where its rows are aligned (N a multiple of 4), else element by element.
Registers: 64 accumulators + 16 fragment values; the 2-way bank conflict of the transposed A store
(lanes t and t + 1, 4 apart in k, write words 4 x 128 apart: one bank) is left for day 45, with the
overlap of the next tile's loads. SGEMM_CUDA's kernel 6 (vectorized,
A transposed) went from 68.7 % to 78.4 % of cuBLAS on an A6000.

Measured on the H200 (make bench, cuBLAS FP32 in the same run): 4.35 ms at 4096^3, 31.6 TFLOP/s,
61.5 % of cuBLAS's 2.68 ms, 1.87x day 43's 8.15 ms; 1.17 ms at 4093 x 4099 x 1021, 29.2 TFLOP/s,
65 % of cuBLAS's 0.76 ms at that shape, 1.75x day 43's 2.05 ms. The unit's target (>= 60 % of cuBLAS
at 4096^3) is met from here on. C is bit-identical to cuBLAS FP32 at both shapes: each output is one
sequential FMA chain over k in order, as cuBLAS's is (no split-K).
"""

import numpy as np

from course import cuda, launch, wide
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
from solutions.day43_matmul_2d_blocking import A_TILE, B_TILE, BK, BM, BN, OUTPUTS, TM, TN, THREADS_2D
from solutions.day43_matmul_2d_blocking import KERNELS as _DAY43_KERNELS
from solutions.day43_matmul_2d_blocking import (  # noqa: F401  (steps 1-5: rows of the table)
    blocking_1d,
    blocking_2d,
    coalesced,
    naive,
    shared_tiles,
)

TITLE = "Matrix multiply 6: 16-byte loads"
MEMORY_SPACE = "shared + register"
VERSIONS = ("naive", "coalesced", "shared_tiles", "blocking_1d", "blocking_2d", "vectorized")

VEC = wide.WIDTH  # 4 floats: 16 bytes an access
HALF = 64  # a thread's outputs are two 4 x 4 blocks HALF apart in rows and in columns
QUADS = BN // (TN // VEC) // VEC  # 16 threads across (and down) a tile, each 4 + 4 columns wide
A_QUADS_PER_ROW = BK // VEC  # 2 float4 along k in a row of the A tile
B_QUADS_PER_ROW = BN // VEC  # 32 float4 in a row of the B tile
assert BM * BK // VEC == THREADS_2D == BK * BN // VEC  # one float4 of each tile a thread per k step
assert TM == TN == 2 * VEC and BM == BN == 2 * HALF == 2 * QUADS * VEC


@cuda.jit
def matmul_vectorized_kernel(a, b, c):  # a (M, K4), b (K4, N4), c (M, N); K4, N4 multiples of 4
    """One block of 256 threads per 128 x 128 tile of C, the tiles on a 1-D grid (tile columns fastest:
    tr, tc = divmod(cuda.blockIdx.x, ceil(N / 128))), 8-deep k steps, every access 16 bytes wide
    through course.wide (wide.load4 / wide.store4: four consecutive floats of the last axis).

    a and b are padded: their rows are multiples of 4 floats (a.shape[1] = K4, b.shape[1] = N4 >= N),
    the padding zeros; b keeps its K rows (b.shape[0]); c is (M, N). Thread t, ty, tx = divmod(t, 16),
    computes the 8 x 8 outputs c[128 tr + 4 ty + r + 64 h, 128 tc + 4 tx + q + 64 w] (r, q = 0..3, h, w = 0, 1).

    For each k0 = 0, 8, ... < K4:
      1. A: thread t loads the float4 a[128 tr + t // 2, k0 + 4 (t % 2) : +4] (zeros past M or K4) and
         stores its 4 values TRANSPOSED, a_tile[(4 (t % 2) + j) * 128 + t // 2] (the tile as (BK, BM)).
         B: it loads b[k0 + t // 32, 128 tc + 4 (t % 32) : +4] (zeros past K or N4) and stores it as
         one float4 at b_tile[(t // 32) * 128 + 4 (t % 32)] (the tile as (BK, BN)).
      2. cuda.syncthreads().
      3. for kk in range(BK): the A fragment is a_tile[kk * 128 + 4 ty + 64 h : +4] (two float4),
         the B fragment b_tile[kk * 128 + 4 tx + 64 w : +4] (two float4); then the 8 x 8 outer
         product into acc (64 registers: acc[i * 8 + j], i = 4 h + r, j = 4 w + q).
      4. cuda.syncthreads().
    Store: when the whole tile lies inside C and its rows are 16-byte aligned (N % 4 == 0), each row's
    two groups of 4 outputs with wide.store4, no guards; otherwise (an edge tile, or N % 4 != 0)
    element by element, rows past M and columns past N not stored. (Two separate loops: one loop
    holding both paths is too big for the compiler to unroll, and the accumulators' indices would
    no longer be constants: they would go to a 256-byte stack frame.)
    """
    # EXERCISE: a float4 of each tile a k step (A transposed), sync, float4 fragments + outer product, sync; store
    # alignment=16: Numba aligns a shared array to its element size only; float4 accesses need 16.
    a_tile = cuda.shared.array(A_TILE, float32, alignment=16)  # (BK, BM): a_tile[k * BM + row], A transposed
    b_tile = cuda.shared.array(B_TILE, float32, alignment=16)  # (BK, BN): b_tile[k * BN + col]
    m, k_dim = a.shape  # k_dim = K4, a multiple of 4 (A's padded columns)
    k_rows = b.shape[0]  # K: B's rows are not padded
    n_pad = b.shape[1]  # N4: the columns b's float4 loads may read
    n = c.shape[1]
    tiles_n = (n + BN - 1) // BN
    tr = cuda.blockIdx.x // tiles_n  # consecutive blocks share a row panel of A: L2 reuse
    tc = cuda.blockIdx.x - tr * tiles_n
    t = cuda.threadIdx.x
    row0 = tr * BM
    col0 = tc * BN
    a_row = t // A_QUADS_PER_ROW  # loader of A: a warp reads 16 rows x 32 bytes (16 full sectors)
    a_k = (t - a_row * A_QUADS_PER_ROW) * VEC
    b_k = t // B_QUADS_PER_ROW  # loader of B: a warp reads 512 consecutive bytes of a row
    b_col = (t - b_k * B_QUADS_PER_ROW) * VEC
    ty = t // QUADS
    tx = t - ty * QUADS
    acc = cuda.local.array(OUTPUTS, float32)  # 64 registers: constant indices only
    a_frag = cuda.local.array(TM, float32)
    b_frag = cuda.local.array(TN, float32)
    for q in range(OUTPUTS):
        acc[q] = float32(0.0)
    zero = float32(0.0)
    for k0 in range(0, k_dim, BK):
        i = row0 + a_row
        ka = k0 + a_k
        if i < m and ka < k_dim:  # K4 is a multiple of 4: a float4 is wholly inside or wholly past
            x0, x1, x2, x3 = wide.load4(a, i, ka)
        else:
            x0, x1, x2, x3 = zero, zero, zero, zero
        # Transposed: the 4 values go to 4 rows of the (BK, BM) tile, one word each. Lanes t and
        # t + 2 store to words 1 apart, t and t + 1 to words 4 x 128 apart (one bank): 2-way conflicts.
        a_tile[a_k * BM + a_row] = x0
        a_tile[(a_k + 1) * BM + a_row] = x1
        a_tile[(a_k + 2) * BM + a_row] = x2
        a_tile[(a_k + 3) * BM + a_row] = x3
        kb = k0 + b_k
        j = col0 + b_col
        if kb < k_rows and j < n_pad:
            y = wide.load4(b, kb, j)
        else:
            y = (zero, zero, zero, zero)
        wide.store4(b_tile, b_k * BN + b_col, y)  # 32 lanes, 512 consecutive bytes: 4 wavefronts
        cuda.syncthreads()  # the tiles were loaded by all 8 warps
        for kk in range(BK):
            # A fragment: a warp holds 2 values of ty, so 2 distinct float4 (a broadcast each).
            a_frag[0], a_frag[1], a_frag[2], a_frag[3] = wide.load4(a_tile, kk * BM + ty * VEC)
            a_frag[4], a_frag[5], a_frag[6], a_frag[7] = wide.load4(a_tile, kk * BM + HALF + ty * VEC)
            # B fragment: 16 values of tx, 16 consecutive float4 = 256 bytes: 2 wavefronts a load.
            b_frag[0], b_frag[1], b_frag[2], b_frag[3] = wide.load4(b_tile, kk * BN + tx * VEC)
            b_frag[4], b_frag[5], b_frag[6], b_frag[7] = wide.load4(b_tile, kk * BN + HALF + tx * VEC)
            for r in range(TM):
                for q in range(TN):
                    acc[r * TN + q] += a_frag[r] * b_frag[q]  # 64 FMAs from 4 shared loads
        cuda.syncthreads()  # the next k step overwrites tiles that slower warps are still reading
    if n % VEC == 0 and row0 + BM <= m and col0 + BN <= n:
        # A whole tile with 16-byte-aligned rows (N a multiple of 4): float4 stores, no guards. A warp
        # writes 2 rows x 256 consecutive bytes a store: 16 full sectors.
        for r in range(TM):
            row = row0 + (r // VEC) * HALF + ty * VEC + r % VEC
            for w in range(TN // VEC):
                s = r * TN + w * VEC
                wide.store4(c, row, col0 + w * HALF + tx * VEC,
                            (acc[s], acc[s + 1], acc[s + 2], acc[s + 3]))
    else:
        # An edge tile, or rows that do not start on 16 bytes: one element at a time, guarded.
        for r in range(TM):
            row = row0 + (r // VEC) * HALF + ty * VEC + r % VEC
            if row < m:
                for q in range(TN):
                    col = col0 + (q // VEC) * HALF + tx * VEC + q % VEC
                    if col < n:
                        c[row, col] = acc[r * TN + q]


@cuda.jit
def pad_columns_kernel(src, dst):  # src (R, C), dst (R, C4), C4 >= C
    """dst[i, j] = src[i, j] for j < C, 0 past it: one element a thread, grid-stride over dst."""
    rows, cols = src.shape
    cols_pad = dst.shape[1]
    start, step = cuda.grid(1), cuda.gridsize(1)
    for e in range(start, rows * cols_pad, step):
        i = e // cols_pad
        j = e - i * cols_pad
        dst[i, j] = src[i, j] if j < cols else float32(0.0)


def pad_columns(d, multiple: int = VEC):
    """A device array whose rows are a multiple of ``multiple`` long (zero columns added), or ``d``
    itself when they already are (no copy)."""
    rows, cols = d.shape
    cols_pad = -(-cols // multiple) * multiple
    if cols_pad == cols:
        return d
    out = launch.empty((rows, cols_pad), np.float32)
    pad_columns_kernel[launch.grid_stride_blocks(rows * cols_pad, 256), 256](d, out)
    return out


_SIG = "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])"
KERNELS = {
    **_DAY43_KERNELS,
    "vectorized": (matmul_vectorized_kernel, _SIG),
    "vectorized.pad": (pad_columns_kernel, "void(float32[:, ::1], float32[:, ::1])"),
}


def run_padded(kernel, a, b, tile_m: int, tile_n: int, threads):
    """c = a @ b through a kernel that reads A and B with 16-byte loads: day 39's run_tiled with A and
    B padded to rows of a multiple of 4 floats first (pad_columns: no copy when they already are).
    The host side of every 16-byte step from day 44 on. NumPy in, NumPy out; device in, device out."""
    check_inputs(a, b)
    m, n = a.shape[0], b.shape[1]
    d_a, d_b = launch.to_device(a, b)
    c = launch.empty((m, n), np.float32)
    kernel[launch.blocks(m, tile_m) * launch.blocks(n, tile_n), threads](pad_columns(d_a), pad_columns(d_b), c)
    return launch.result(c, a, b)


def vectorized(a, b):
    return run_padded(matmul_vectorized_kernel, a, b, BM, BN, THREADS_2D)


# The unit's fixed interface: optimized(a, b) is the best step so far.
optimized = vectorized
