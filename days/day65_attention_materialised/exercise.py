"""Day 65 exercise: attention I, materialised scores -- out = softmax(scale q k^T) v per (batch, head), float32.

The problem is attention_common's (imported): q (batch, heads, seq_q, dim), k and v (batch, kv_heads,
seq_k, dim), heads a multiple of kv_heads (query head h reads KV head h // (heads // kv_heads)), dim
in 32/64/96/128, scale 1 / sqrt(dim), bottom-right causal mask (query i sees keys j <= i + seq_k -
seq_q), rows that see no key are zeros.

v1 naive      three kernels, the scores through global memory: S = scale q k^T as a batched GEMM of
              shared-memory tiles (32 x 32 outputs a block of 64 threads, 4 x 4 a thread), the causal
              mask written as -inf; day 57's row softmax over S in place (a warp or a block a row, the
              row held in registers; a row all -inf gives zeros); O = P v, the same tiled GEMM.
v2 optimized  one kernel, a block of 64 threads per (batch, head, QB = 16 query rows): the block's 16 x
              seq_k scores live in shared memory (up to max_keys(dim): MAX_KEYS = 512 keys at dim <= 64,
              256 at 96/128), K then V streamed through a 32-key shared tile (stage_tile: 16-byte loads,
              all of a thread's issued before its first store); register tiles as day 43's:
              each thread 2 rows x 4 keys of a score tile and 2 rows x dim / 8 outputs, every inner
              shared read 16 bytes wide (wide.load4); the row softmax on the shared scores, a warp a row.
              Nothing of size seq^2 in global memory. Longer sequences: ValueError (day 66 removes it).
library       torch.nn.functional.scaled_dot_product_attention (float32: torch picks the backend).

Measured on the H200 (make bench, FP32 GEMM peak 51 TFLOP/s in the same run): at (8, 32, 32, 512, 512,
64) naive 2.450 ms (14 % of the FP32 peak), optimized 1.637 ms (21 %, 1.50x faster than naive), torch
SDPA float32 0.537 ms (63 %); causal: naive 2.460 ms, optimized 0.936 ms (2.63x faster), torch 0.345 ms.
At (8, 32, 32, 4096, 4096, 128) optimized cannot run (bench_skip): naive 283.6 ms (15 %), torch 46.4 ms
(93 %); causal 284.2 ms and 24.0 ms. Two v2s came before this one: a block of 4 warps per 4 query rows,
one key a lane, which re-read all of K and V for every 4 rows with two shared words per FMA (4.5x SLOWER
than naive at 1024 keys: 42.6 against 9.50 ms); then this kernel while it staged each K/V tile one load
at a time (slower than naive too: 5.70 ms against 2.46 ms at 512 keys).

Napkin math at the issue's shape (8, 32 heads, seq 4096, dim 128): 4 b h s^2 d = 2.2 TFLOP (about half
with causal: the pairs above the diagonal are not counted). q, k, v and out are 4 x 537 MB = 2.1 GB,
but the scores are b h s^2 x 4 B = 17.2 GB: naive writes them (17 GB), the softmax reads and writes
them (34 GB), P v reads them again (17 GB): 69 GB, ~16 ms at the H200's ~4.2 TB/s before any FLOP,
and 17 GB of the H200's 141 GB held just for S. The FP32 roofline (cuBLAS FP32 GEMM ~51 TFLOP/s)
puts the FLOPs at ~43 ms. The optimized kernel exists only for short sequences, and the day's bench
shape is one: (8, 32, 32, 512, 512, 64), 17.2 GFLOP (0.34 ms at the peak), scores 268 MB that naive
moves four times (1.07 GB, ~0.26 ms of DRAM) and optimized never stores.

Optimized, per block (dim 64): shared q 16 x 68 floats (4.3 KB), one K/V tile 32 x 68 (8.7 KB), the
scores 16 x 516 (33 KB): 45 KB of the 48 KB a block may declare statically (at dim 128: 256 keys, 41
KB). Rows of dim + 4 floats are 16-byte aligned and 4 banks apart, so a warp's v4 read of 4 q rows
(broadcast) or of 8 key rows is one pass over the banks. Scores: per 4 d a thread does 2 q + 4 key v4
loads for 32 FMAs (5.3 FMAs a load; old v2: 0.5); P v: per 4 keys 2 p v4 loads + 4 x dim / 32 v v4
loads for 2 x 4 x dim / 8 FMAs (dim 64: 10 loads, 64 FMAs). Registers: 16 accumulators, 8 scores, 16
fragment words: 96 a thread (the compiler report), no stack; shared memory limits it to 4 blocks (8
warps) an SM, each warp with 8-32 independent FMA chains. K and V are re-read once per 16 rows (32
times a head at 512 keys): 256 KB a block from L2 per 4.2 MFLOP, 16 FLOPs a byte: 3.2 TB/s of L2 at
the FP32 peak, within what the H200's L2 serves; the low occupancy, the softmax pass over shared
memory and the 4 barriers a key tile take the rest.
Expected: ~30-40 % of the FP32 peak at the bench shape, several times naive (whose three launches and
four passes over the scores dominate at 512 keys). Not reached: 21 %, 1.50x faster than naive (2.63x
causal). The 8 warps an SM (64 threads a block, 45 KB of shared memory, 4 blocks) leave latency exposed;
the remaining levers are more rows a block or double-buffered K/V tiles (not measured).

What you write (each raises NotImplementedError with its hint until you do):
  scores_kernel                        find (b, h, g) and the tile; per 32-wide dim step: stage q and k slices,
                                       sync, 4 x 4 FMAs, sync; store (45 lines)
  pv_kernel                            find (b, h, g), the tile; per 32-key step: stage p, v (zeros past the ends),
                                       sync, FMAs, sync; store (40 lines)
  fused_kernel.attention_block_kernel  stage q; K tiles: a 2 x 4 v4 score tile into s_sh; softmax a row a warp; V
                                       tiles: v4 P v; store (91 lines)
Everything else in this file is given. Grade with:  make check DAY=65
"""

import functools
import math

import numpy as np

from course import cuda, launch, wide
from numba import float32  # numba names only after the course import
from solutions import attention_common as ac
from solutions.day26_reduction_grid_stride import _address
from solutions.day57_softmax_rows import (
    BLOCK_COLS,
    ROW_WARPS,
    VEC,
    WARP,
    WARP_COLS,
    _resident_blocks,
    block_class,
    make_block_rows_kernel,
    make_warp_rows_kernel,
    warp_allmax,
    warp_allsum,
    warp_groups,
)
from solutions.day57_softmax_rows import optimized as softmax_rows

TITLE = "Attention I: materialised scores"
MEMORY_SPACE = "global + shared"
VERSIONS = ("naive", "optimized")
# (batch, heads, kv_heads, seq_q, seq_k, dim, causal[, kind]): one query and one key (both masks);
# fewer queries than keys and more (causal: the first rows see no key, row seq_q - seq_k sees one);
# GQA 4/2 and MQA 4/1; lengths off the 32-key tile; one dim-128 case. Scores near +-1e4 ("large"):
# LARGE_SIZES, graded at LARGE_RTOL.
TEST_SIZES = ((1, 1, 1, 1, 1, 32, False), (1, 1, 1, 1, 1, 32, True), (1, 4, 2, 5, 37, 32, True),
              (1, 2, 1, 37, 5, 32, True), (1, 2, 2, 20, 20, 64, True), (1, 4, 1, 9, 34, 32, False),
              (1, 2, 2, 9, 12, 128, True))
# Both versions at 512 keys, dim 64 (short sequences: the scores of 16 rows fit on chip); the issue's
# shape, where only naive runs (17 GB of scores).
BENCH_SIZES = ((8, 32, 32, 512, 512, 64, False), (8, 32, 32, 512, 512, 64, True),
               (8, 32, 32, 4096, 4096, 128, False), (8, 32, 32, 4096, 4096, 128, True))
# tools/bench_all.py starts this day's worker first (course.prepare.Ahead): its float64 references at the
# benchmark shapes take minutes, and the other attention days (65-70) share them.
BENCH_PREPARE_EARLY = True
LARGE_SIZES = ((1, 2, 2, 20, 20, 64, True, "large"), (1, 4, 1, 5, 33, 32, False, "large"))
# A logit near 1e3 computed in float32 (dim products of size ~1e4 / dim summed, then scaled) is off
# by ~1e-3 in absolute terms, whatever the kernel (the float64 reference sees exact logits). An output
# sum_j w_j v_j then moves by about sum_j w_j dlogit_j (v_j - out): an absolute error at the scale of
# v, not of the element, large wherever two keys nearly tie and the element happens to be small (a
# seed gave -0.01408 for -0.01323, 2.6e-4 of the output's scale). So every element is held to the
# output's scale (LARGE_FLOOR = 1: course.checking's floor as a share of it), at 5e-3 of it: the worst
# seen in 30 seeds is 2.8e-4, and a kernel that mis-scales its running sums is off by a tenth or more.
LARGE_RTOL = 5e-3
LARGE_FLOOR = 1.0
BOUND = "compute"
RTOL = ac.RTOL["float32"]
ERROR_FLOOR = ac.ERROR_FLOOR["float32"]
reference = ac.reference
traffic = ac.traffic
scores_bytes = ac.scores_bytes

TILE = 32  # the GEMMs' output tile edge and their reduction step: dim is a multiple of 32
TILE_PAD = TILE + 1  # a padded tile row: column kk of 32 rows falls in 32 banks
SIDE = 8  # (8, 8) threads a GEMM block, 4 x 4 outputs each: 16 FMAs per 8 shared loads
PER = TILE // SIDE  # outputs a thread along each side of the tile (rows ty + 8 r, columns tx + 8 c)
GEMM_THREADS = SIDE * SIDE
QB = 16  # optimized: query rows a block (every K/V tile staged once feeds 16 rows)
KT = 32  # optimized: keys a K/V tile
OPT_THREADS = 64  # optimized: 2 warps; thread (tr, tc) = divmod(tid, 8): rows tr + 8 r, keys tc + 8 c
TC = 8  # threads across (keys tc + 8 c of a tile in the scores; columns 4 tc + 32 c + x in P v)
TR = OPT_THREADS // TC  # 8 threads down
RQ = QB // TR  # rows a thread: 2
RK = KT // TC  # scores a thread per row and tile: 4
OPT_WARPS = OPT_THREADS // WARP
assert VEC == wide.WIDTH  # day 57's VEC: 4 floats, one 16-byte load (the optimized kernel's shared reads)
MAX_KEYS = 512  # optimized, dim <= 64: the block's scores, 16 x (512 + 4) floats = 33 KB of shared memory


def max_keys(dim: int) -> int:
    """The longest key sequence optimized takes at this head size: QB rows of scores beside the q rows
    and one K/V tile (rows of dim + 4 floats) in 48 KB: 512 keys up to dim 64 (45 KB at 64), 256 at dim
    96 and 128 (41 KB at 128; 512 keys would need 57 KB)."""
    return MAX_KEYS if dim <= 64 else MAX_KEYS // 2


LOG2E = 1.4426950408889634  # exp(x) = exp2(x log2 e): log2 e folded into the scale once
NEG_INF = np.float32(-math.inf)  # float32, not a Python float: the softmax stays in float32


def make_inputs(n, seed: int = 0):
    """(q, k, v, causal) in float32 for size n (attention_common.make_inputs)."""
    return ac.make_inputs(n, seed, np.float32)


# --- v1: the scores through global memory --------------------------------------------------------------

@cuda.jit
def scores_kernel(q, k, s, scale, causal):
    # q (batch, heads, seq_q, dim), k (batch, kv_heads, seq_k, dim), s (batch, heads, seq_q, seq_k)
    """S = scale q k^T for every (batch, head), a batched GEMM of shared tiles. Block (8, 8) threads,
    grid (ceil(seq_k / 32), ceil(seq_q / 32), batch * heads): blockIdx.z = b * heads + h, the KV head
    g = h // (heads // kv_heads); the block's 32 x 32 tile of S starts at row i0 = 32 blockIdx.y,
    column j0 = 32 blockIdx.x. For each 32-wide step d0 along dim: the 64 threads load the 32 x 32
    slices q[b, h, i0:, d0:] and k[b, g, j0:, d0:] into shared (TILE, TILE + 1) arrays (16 elements
    each a thread, consecutive threads along dim: coalesced; 0.0 past seq_q / seq_k), barrier, then
    thread (tx, ty) adds q_sh[ty + 8 r, kk] * k_sh[tx + 8 c, kk] to acc[r, c] (4 x 4 registers) for
    kk < 32, barrier. Store s[b, h, i, j] = scale acc for i < seq_q, j < seq_k, or -inf when causal
    and j > i + seq_k - seq_q."""
    raise NotImplementedError("Day 65: find (b, h, g) and the tile; per 32-wide dim step: stage q and k slices, sync, "
                              "4 x 4 FMAs, sync; store (45 lines)")


@cuda.jit
def pv_kernel(p, v, out):
    # p (batch, heads, seq_q, seq_k), v (batch, kv_heads, seq_k, dim), out (batch, heads, seq_q, dim)
    """out = P v for every (batch, head), scores_kernel's tiling with the reduction along seq_k. Block
    (8, 8), grid (dim / 32, ceil(seq_q / 32), batch * heads); the tile starts at row i0 = 32
    blockIdx.y, column c0 = 32 blockIdx.x. For each 32-key step j0: stage p[b, h, i0:, j0:] (rows
    along keys) and v[b, g, j0:, c0:] (32 x 32, 0.0 past seq_q / seq_k; a key past seq_k must be 0.0
    in BOTH: 0 * garbage can be NaN), barrier, acc[r, c] += p_sh[ty + 8 r, kk] * v_sh[kk, tx + 8 c],
    barrier. Store out[b, h, i, c0 + tx + 8 c] for i < seq_q."""
    raise NotImplementedError("Day 65: find (b, h, g), the tile; per 32-key step: stage p, v (zeros past the ends), "
                              "sync, FMAs, sync; store (40 lines)")


def softmax_rows_inplace(s):
    """Day 57's row softmax over a device (rows, cols) float32 array, written back over it: each row is
    held in one warp's (cols <= 1024) or one block's (cols <= 32768) registers before any store, so the
    output may overwrite the input. Longer rows: day 57's online kernel into a fresh array. Returns
    the softmaxed array (s itself, or the fresh one)."""
    rows, cols = s.shape
    if cols > BLOCK_COLS:
        return softmax_rows(s)
    flat = s.reshape(rows * cols)
    wide_access = cols % VEC == 0 and _address(flat) % 16 == 0
    if cols <= WARP_COLS:
        kernel = make_warp_rows_kernel(warp_groups(cols), wide_access)
        kernel[launch.grid_stride_blocks(rows * WARP, ROW_WARPS * WARP, 8), ROW_WARPS * WARP](flat, rows, cols, flat)
    else:
        threads, groups = block_class(cols)
        kernel = make_block_rows_kernel(threads, groups, wide_access)
        grid = max(1, min(rows, _resident_blocks(threads, groups, wide_access)))
        kernel[grid, threads](flat, rows, cols, flat)
    return s


# --- v2: the scores in shared memory ---------------------------------------------------------------------

@functools.cache
def fused_kernel(head_dim: int):
    """The optimized kernel for one head size (a constant: the register tiles unroll). Launch: grid
    (ceil(seq_q / QB), batch * heads), OPT_THREADS threads; arguments (q, k, v, scale * log2(e),
    causal, out)."""
    DIM = head_dim
    DPAD = DIM + VEC  # rows of dim + 4 floats: 16-byte aligned, consecutive rows 4 banks apart
    KEYS = max_keys(DIM)
    SPAD = KEYS + VEC  # a score row: 16-byte aligned, rows 4 banks apart (v4 reads of 4 rows: no conflict)
    OV = DIM // (TC * VEC)  # 16-byte column groups a thread in P v: columns 4 tc + 32 c + x
    OC = OV * VEC
    CHUNKS = DIM // VEC  # 16-byte chunks a row
    LOADS = KT * CHUNKS // OPT_THREADS  # chunks a thread stages a K/V tile: dim / 8 (8 at dim 64)

    @cuda.jit(device=True)
    def stage_tile(src, b, g, k0, seq_k, kv_sh, tid):
        """kv_sh[:KT] = src[b, g, k0 : k0 + KT] (0.0 past seq_k), 16 bytes a load: every one of the
        thread's LOADS loads is issued before the first store, so each warp has LOADS x 512 bytes in
        flight (one load at a time would leave the 8 warps an SM waiting ~1 us of DRAM latency a key)."""
        buf = cuda.local.array((LOADS, VEC), float32)  # unrolled: registers
        for u in range(LOADS):
            e = tid + u * OPT_THREADS  # consecutive threads, consecutive chunks of a row: coalesced
            r = e // CHUNKS
            c = (e - r * CHUNKS) * VEC
            if k0 + r < seq_k:
                buf[u, 0], buf[u, 1], buf[u, 2], buf[u, 3] = wide.load4(src, b, g, k0 + r, c)
            else:
                buf[u, 0] = buf[u, 1] = buf[u, 2] = buf[u, 3] = float32(0.0)
        for u in range(LOADS):
            e = tid + u * OPT_THREADS
            r = e // CHUNKS
            wide.store4(kv_sh, r, (e - r * CHUNKS) * VEC, (buf[u, 0], buf[u, 1], buf[u, 2], buf[u, 3]))

    @cuda.jit
    def attention_block_kernel(q, k, v, scale2, causal, out):
        """A block of 64 threads per (QB = 16 query rows, batch * head): blockIdx.y = b * heads + h, g =
        h // (heads // kv_heads). Thread tid: tr, tc = divmod(tid, 8); rows i0 + tr + 8 r (r < 2).
        Shared (alignment=16): q_sh (QB, dim + 4), kv_sh (KT, dim + 4), s_sh (QB, KEYS + 4) with KEYS =
        max_keys(dim), inv_sh (QB). kend = seq_k, or with causal min(seq_k, last row of the block +
        seq_k - seq_q + 1); kpad = kend rounded up to KT. 1. Stage the q rows times scale2 (base-2
        logits; 0.0 past seq_q), barrier. 2. For each 32-key tile k0 < kend: stage k[b, g, k0:k0 + 32]
        (0.0 past seq_k), barrier; the thread's 2 x 4 scores (rows tr + 8 r, keys k0 + tc + 8 c), 4 d a
        step from 16-byte loads (2 q slices, 4 key slices: 32 FMAs); store s_sh[row, key], -inf for key
        >= kend or (causal) key > row + seq_k - seq_q; barrier. 3. Warp w alone on rows 8 w .. 8 w + 7:
        m = warp_allmax of s_sh[row, :kpad] (lane-strided), s_sh[row, j] = exp2(s - m) (0 when m is
        -inf: a row with no key), inv_sh[row] = 1 / warp_allsum, or 0; barrier. 4. For each 32-key
        tile: stage v rows, barrier; per 4 keys: p of the 2 rows (16-byte loads), then per key the
        thread's v columns 4 tc + 32 c (16 bytes each), acc += p v; barrier. 5. out[b, h, row, 4 tc +
        32 c:+4] = acc inv_sh[row] (16-byte stores) for rows < seq_q."""
        raise NotImplementedError("Day 65: stage q; K tiles: a 2 x 4 v4 score tile into s_sh; softmax a row a warp; V "
                                  "tiles: v4 P v; store (91 lines)")

    return attention_block_kernel


_SIG4 = "float32[:, :, :, ::1]"
KERNELS = {
    "naive.scores": (scores_kernel, f"void({_SIG4}, {_SIG4}, {_SIG4}, float32, boolean)"),
    "naive.pv": (pv_kernel, f"void({_SIG4}, {_SIG4}, {_SIG4})"),
    "optimized": (fused_kernel(64), f"void({_SIG4}, {_SIG4}, {_SIG4}, float32, boolean, {_SIG4})"),
}


def check_inputs(q, k, v, causal):
    """attention_common's checks for float32 inputs (ValueError naming the argument)."""
    ac.check_inputs(q, k, v, causal, dtype=np.float32)


def naive(q, k, v, causal):
    """Three kernels: S = scale q k^T (masked) in global memory, softmax over S in place, out = P v."""
    check_inputs(q, k, v, causal)
    dq, dk, dv = launch.to_device(q, k, v)
    b, h, seq_q, dim = q.shape
    seq_k = k.shape[2]
    s = launch.empty((b, h, seq_q, seq_k), np.float32)  # b h seq_q seq_k floats: 17 GB at the shape
    tiles_q = (seq_q + TILE - 1) // TILE
    scores_kernel[((seq_k + TILE - 1) // TILE, tiles_q, b * h), (SIDE, SIDE)](
        dq, dk, s, float32(1.0 / math.sqrt(dim)), bool(causal))
    p = softmax_rows_inplace(s.reshape(b * h * seq_q, seq_k)).reshape(b, h, seq_q, seq_k)
    out = launch.empty(q.shape, np.float32)
    pv_kernel[(dim // TILE, tiles_q, b * h), (SIDE, SIDE)](p, dv, out)
    return launch.result(out, q, k, v)


def bench_skip(version, n):
    """Why a version cannot run at size n, or None: optimized holds every score of its rows on chip."""
    seq_k, dim = ac.geometry(n)[4], ac.geometry(n)[5]
    if version == "optimized" and seq_k > max_keys(dim):
        return (f"seq_k {seq_k} > max_keys({dim}) = {max_keys(dim)} (MAX_KEYS): the scores of {QB} rows would "
                f"not fit in a block's 48 KB of shared memory")
    return None


def optimized(q, k, v, causal):
    """One kernel: a block per 16 query rows, their scores in shared memory (seq_k <= max_keys(dim))."""
    check_inputs(q, k, v, causal)
    b, h, seq_q, dim = q.shape
    seq_k = k.shape[2]
    if seq_k > max_keys(dim):
        raise ValueError(f"seq_k: expected at most max_keys({dim}) = {max_keys(dim)} keys (MAX_KEYS; a block holds "
                         f"the scores of its {QB} rows in shared memory), got {seq_k}: use day 66's flash attention")
    dq, dk, dv = launch.to_device(q, k, v)
    out = launch.empty(q.shape, np.float32)
    grid = ((seq_q + QB - 1) // QB, b * h)
    fused_kernel(dim)[grid, OPT_THREADS](dq, dk, dv, float32(LOG2E / math.sqrt(dim)), bool(causal), out)
    return launch.result(out, q, k, v)


def library(q, k, v, causal):
    """torch's scaled_dot_product_attention on the same arrays (float32: torch picks the backend)."""
    return ac.torch_sdpa(q, k, v, causal, backend=None)
