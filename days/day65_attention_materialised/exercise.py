"""Day 65 exercise: attention I, materialised scores -- out = softmax(scale q k^T) v per (batch, head), float32.

The problem is attention_common's (imported): q (batch, heads, seq_q, dim), k and v (batch, kv_heads,
seq_k, dim), heads a multiple of kv_heads (query head h reads KV head h // (heads // kv_heads)), dim
in 32/64/96/128, scale 1 / sqrt(dim), bottom-right causal mask (query i sees keys j <= i + seq_k -
seq_q), rows that see no key are zeros.

v1 naive      three kernels, the scores through global memory: S = scale q k^T as a batched GEMM of
              shared-memory tiles (32 x 32 outputs a block of 64 threads, 4 x 4 a thread), the causal
              mask written as -inf; day 57's row softmax over S in place (a warp or a block a row, the
              row held in registers; a row all -inf gives zeros); O = P v, the same tiled GEMM.
v2 optimized  one kernel, a block per (batch, head, QB = 4 query rows): the block's 4 x seq_k scores
              live in shared memory (up to MAX_KEYS = 1536 keys), K then V streamed through a 32-key
              shared tile: scores, softmax and P v on chip, nothing of size seq^2 in global memory.
              Longer sequences: ValueError (the scores must fit on chip; day 66 removes the limit).
library       torch.nn.functional.scaled_dot_product_attention (float32: torch picks the backend).

Napkin math at the issue's shape (8, 32 heads, seq 4096, dim 128): 4 b h s^2 d = 2.2 TFLOP (about half
with causal: the pairs above the diagonal are not counted). q, k, v and out are 4 x 537 MB = 2.1 GB,
but the scores are b h s^2 x 4 B = 17.2 GB: naive writes them (17 GB), the softmax reads and writes
them (34 GB), P v reads them again (17 GB): 69 GB, ~16 ms at the H200's ~4.2 TB/s before any FLOP,
and 17 GB of the H200's 141 GB held just for S. The FP32 roofline (cuBLAS FP32 GEMM ~51 TFLOP/s)
puts the FLOPs at ~43 ms; the scores add ~16 ms of DRAM time in kernels that do little else (the
softmax moves 34 GB for a few FLOPs an element), and 17 GB of memory. The optimized kernel
moves only q, k, v, out (k and v re-read from L2 once per 4-row block), but it exists only for short
sequences: 4 rows x 1536 keys x 4 B = 24 KB of scores beside the K/V tile (32 x 129 floats, 16.5 KB)
and the 4 query rows (2 KB), 42.6 KB of the 48 KB a block may declare statically. At 4096 keys the
scores of even one query row would take 16 KB; day 66's online softmax never holds them at all.
Its inner products read two shared words per FMA (a query word, broadcast, and a key word): like day
41, at most ~1/8 of the FP32 peak; it wins over naive by not moving the scores, not by its FLOP rate.

What you write (each raises NotImplementedError with its hint until you do):
  scores_kernel                        find (b, h, g) and the tile; per 32-wide dim step: stage q and k slices,
                                       sync, 4 x 4 FMAs, sync; store (45 lines)
  pv_kernel                            find (b, h, g), the tile; per 32-key step: stage p, v (zeros past the ends),
                                       sync, FMAs, sync; store (40 lines)
  fused_kernel.attention_block_kernel  stage q; K tiles: a key a lane into s_sh; softmax a row a warp; V tiles: P v;
                                       store (61 lines)
Everything else in this file is given. Grade with:  make check DAY=65
"""

import functools
import math

import numpy as np

from course import cuda, launch
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
# Both versions at 1024 keys; the shape, where only naive runs (17 GB of scores).
BENCH_SIZES = ((8, 32, 32, 1024, 1024, 64, False), (8, 32, 32, 1024, 1024, 64, True),
               (8, 32, 32, 4096, 4096, 128, False), (8, 32, 32, 4096, 4096, 128, True))
LARGE_SIZES = ((1, 2, 2, 20, 20, 64, True, "large"), (1, 4, 1, 5, 33, 32, False, "large"))
# A logit near 1e3 computed in float32 (dim products of size ~1e4 / dim summed, then scaled) is off
# by ~1e-3 in absolute terms: exp(s - m) turns that into a relative error of ~1e-3 on each weight,
# whatever the kernel (the float64 reference sees exact logits). 2.4e-3 is the worst seen in 8 seeds.
LARGE_RTOL = 1e-2
BOUND = "compute"
RTOL = ac.RTOL["float32"]
ERROR_FLOOR = ac.ERROR_FLOOR
reference = ac.reference
traffic = ac.traffic
scores_bytes = ac.scores_bytes

TILE = 32  # the GEMMs' output tile edge and their reduction step: dim is a multiple of 32
TILE_PAD = TILE + 1  # a padded tile row: column kk of 32 rows falls in 32 banks
SIDE = 8  # (8, 8) threads a GEMM block, 4 x 4 outputs each: 16 FMAs per 8 shared loads
PER = TILE // SIDE  # outputs a thread along each side of the tile (rows ty + 8 r, columns tx + 8 c)
GEMM_THREADS = SIDE * SIDE
QB = 4  # optimized: query rows a block, a warp each
KT = 32  # optimized: keys a K/V tile (a warp's width: lane = key in the scores, lane = column in P v)
MAX_KEYS = 1536  # optimized: the block's scores, QB x MAX_KEYS floats = 24 KB of shared memory
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
    """The optimized kernel for one head size (a constant: the per-lane output columns unroll into
    registers). Launch: grid (ceil(seq_q / QB), batch * heads), QB * 32 threads; arguments (q, k, v,
    scale * log2(e), causal, out)."""
    DIM = head_dim
    COLS = DIM // WARP  # output columns a lane: lane + 32 c
    DPAD = DIM + 1  # +1: a column of 32 key rows falls in 32 banks

    @cuda.jit
    def attention_block_kernel(q, k, v, scale2, causal, out):
        """A block of QB warps per (QB query rows, batch * head): blockIdx.y = b * heads + h, g = h //
        (heads // kv_heads), warp w owns query row i = QB blockIdx.x + w. Shared: q_sh (QB, DIM + 1),
        kv_sh (KT, DIM + 1) (+1: a column of 32 key rows falls in 32 banks), s_sh (QB, MAX_KEYS).
        kend = seq_k, or with causal min(seq_k, last row of the block + seq_k - seq_q + 1) (no row of the
        block sees a key past it). 1. Stage the block's q rows (0.0 past seq_q), barrier. 2. For each
        32-key tile k0 < kend: stage k[b, g, k0:k0 + 32] (0.0 past seq_k), barrier; lane l scores key j =
        k0 + l against its warp's row (dot of q_sh[w] and kv_sh[l]) times scale2 (base-2 logits), -inf
        where causal and j > i + seq_k - seq_q; store s_sh[w, j] for j < kend; barrier. 3. Warp w alone
        on its row: m = warp_allmax of s_sh[w, :kend] (lane-strided), s_sh[w, j] = exp2(s - m) (0 when
        m is -inf: a row with no key), l = warp_allsum, inv = 1 / l or 0. 4. For each 32-key tile:
        stage v rows, barrier, acc[c] += s_sh[w, j] * kv_sh[j - k0, lane + 32 c] for j < kend,
        barrier. 5. out[b, h, i, lane + 32 c] = acc[c] * inv for i < seq_q."""
        raise NotImplementedError("Day 65: stage q; K tiles: a key a lane into s_sh; softmax a row a warp; V tiles: P "
                                  "v; store (61 lines)")

    return attention_block_kernel


_SIG4 = "float32[:, :, :, ::1]"
KERNELS = {
    "naive.scores": (scores_kernel, f"void({_SIG4}, {_SIG4}, {_SIG4}, float32, boolean)"),
    "naive.pv": (pv_kernel, f"void({_SIG4}, {_SIG4}, {_SIG4})"),
    "optimized": (fused_kernel(128), f"void({_SIG4}, {_SIG4}, {_SIG4}, float32, boolean, {_SIG4})"),
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
    seq_k = ac.geometry(n)[4]
    if version == "optimized" and seq_k > MAX_KEYS:
        return (f"seq_k {seq_k} > MAX_KEYS {MAX_KEYS}: the scores of {QB} rows would not fit in a block's "
                f"48 KB of shared memory")
    return None


def optimized(q, k, v, causal):
    """One kernel: a block per 4 query rows, their scores in shared memory (seq_k <= MAX_KEYS)."""
    check_inputs(q, k, v, causal)
    b, h, seq_q, dim = q.shape
    seq_k = k.shape[2]
    if seq_k > MAX_KEYS:
        raise ValueError(f"seq_k: expected at most MAX_KEYS = {MAX_KEYS} keys (a block holds the scores of "
                         f"its {QB} rows in shared memory), got {seq_k}: use day 66's flash attention")
    dq, dk, dv = launch.to_device(q, k, v)
    out = launch.empty(q.shape, np.float32)
    grid = ((seq_q + QB - 1) // QB, b * h)
    fused_kernel(dim)[grid, QB * WARP](dq, dk, dv, float32(LOG2E / math.sqrt(dim)), bool(causal), out)
    return launch.result(out, q, k, v)


def library(q, k, v, causal):
    """torch's scaled_dot_product_attention on the same arrays (float32: torch picks the backend)."""
    return ac.torch_sdpa(q, k, v, causal, backend=None)
