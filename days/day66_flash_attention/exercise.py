"""Day 66 exercise: attention II, the FlashAttention forward pass in FP32 Numba -- day 65's problem, with no limit
on the sequence and nothing of size seq^2 anywhere.

v1 materialised  day 65's naive (imported, given): S = scale q k^T to global memory, softmax in place,
                 O = P v: 4 b h seq_q seq_k bytes of scores written, read, written and read again.
v2 flash         a block of 128 threads per (batch, head, 32 query rows): the block's q tile in shared
                 memory, K and V streamed through one 32-key shared tile, the online softmax (running
                 max m and sum l per row; the output accumulator rescaled by exp2(m_old - m_new) each
                 tile), the output in registers, one store at the end. Causal: key tiles above the
                 diagonal are never visited, only those crossing it are masked.
library          torch.nn.functional.scaled_dot_product_attention (float32: torch picks the backend).

Tiles for the H200 (FP32 on the CUDA cores; 48 KB of static shared memory a block): BQ = BK = 32 and
128 threads. Thread (tr, tc) = divmod(tid, 8) owns query rows tr and tr + 16 and keys tc + 8 c (c < 4)
of each 32 x 32 score tile, and the same two rows' output columns tc + 8 c (c < dim / 8). Scores:
per element of dim, 2 broadcast q words + 4 key words for 8 FMAs; P v: per key, 2 p words + dim / 8 v
words for dim / 4 FMAs (16 + 2 for 32 at dim 128): ~1.5 FMAs per shared load over a tile, where the
SM serves one shared wavefront per 4 warp FMA instructions: shared memory caps this kernel near
40 % of the FP32 peak, before the exp2s and the barriers. The two rows' output (2 x 16 floats at dim
128), the 8 scores and the row state stay in registers (no stack): Numba's fully unrolled dim loop
takes 162 registers a thread at dim 128 (the compiler report), 3 blocks (12 warps) an SM, fewer
than the 38 KB of shared memory (q 16.5 KB, the K/V tile 16.5 KB, P 5 KB) would allow (5). Bigger
query tiles would read K and V fewer times but need q in more than 48 KB (dynamic shared memory)
or in registers (day 67's tensor-core version holds its q fragments there).

exp is exp2 with log2(e) folded into the query's scale (day 73), under fastmath (ex2.approx); the
masks and the running max use finite sentinels (no infinities under fastmath).

Napkin math at the issue's shape (8, 32 heads, seq 4096, dim 128): 4 b h s^2 d = 2.2 TFLOP, 1.1
causal; at ~51 TFLOP/s (cuBLAS FP32 GEMM) 43 ms, and the shared-memory cap above puts this kernel
at ~110 ms or more (~40 % of the peak at best). Bytes: q and out once (1.07 GB), K and V once per
32-row query tile: 128 x 1.07 GB = 137 GB from L2 (a (batch, head)'s K and V are 4 MB, and its 128
query tiles run side by side), far less from DRAM. materialised moves 69 GB of scores through DRAM and
holds 17 GB of them.

What you write (each raises NotImplementedError with its hint until you do):
  flash_kernel.flash_attention_kernel  stage q; per K/V tile: scores, masks, online softmax (rescale acc), P v,
                                       barriers; store acc / l (95 lines)
Everything else in this file is given. Grade with:  make check DAY=66
"""

import functools
import math

import numpy as np

from course import cuda, launch
from numba import float32  # numba names only after the course import
from solutions import attention_common as ac
from solutions.day25_reduction_last_warp import FULL_MASK
from solutions.day65_attention_materialised import LARGE_RTOL, check_inputs, make_inputs  # noqa: F401
from solutions.day65_attention_materialised import naive as materialised  # noqa: F401  (v1: day 65's naive, given)

TITLE = "Attention II: FlashAttention forward (FP32)"
MEMORY_SPACE = "shared + register"
VERSIONS = ("materialised", "flash")
# The hard inputs (attention_common): seq 1; seq_q < seq_k and seq_q > seq_k causal (rows that see no
# key, a row that sees one); GQA 4/2, MQA 4/1; lengths off the 32-key and 32-row tiles (several key
# tiles: the rescale matters); one dim-128 case. Scores near +-1e4: LARGE_SIZES, at LARGE_RTOL.
TEST_SIZES = ((1, 1, 1, 1, 1, 32, False), (1, 1, 1, 1, 1, 32, True), (1, 4, 2, 5, 37, 32, True),
              (1, 2, 1, 37, 5, 32, True), (1, 2, 2, 20, 20, 64, True), (1, 4, 1, 9, 70, 32, False),
              (1, 2, 2, 9, 33, 128, True))
LARGE_SIZES = ((1, 2, 1, 9, 45, 64, False, "large"), (1, 2, 2, 34, 34, 32, True, "large"))
BENCH_SIZES = ((8, 32, 32, 4096, 4096, 128, False), (8, 32, 32, 4096, 4096, 128, True))
BOUND = "compute"
RTOL = ac.RTOL["float32"]
ERROR_FLOOR = ac.ERROR_FLOOR
reference = ac.reference
traffic = ac.traffic

BQ = 32  # query rows a block
BK = 32  # keys a tile
THREADS = 128
TC = 8  # threads across a tile (keys tc + 8 c, output columns tc + 8 c); 16 down (rows tr, tr + 16)
TR = THREADS // TC
RQ = BQ // TR  # rows a thread: 2
RK = BK // TC  # scores a thread per row: 4
P_PAD = BK + 8  # p_sh row stride: rows tr = 0..3 of a warp start 8 banks apart, so its 32 stores are distinct banks
LOG2E = 1.4426950408889634
NO_LOGIT = np.float32(-1.0e30)  # the running max before any key: finite, so exp2(m_old - m_new) is never NaN
MASKED = np.float32(-2.0e30)  # a masked score: exp2(MASKED - m) = 0 for any m >= NO_LOGIT


@functools.cache
def flash_kernel(head_dim: int):
    """The flash kernel for one head size (a constant: the output columns a thread holds unroll into
    registers). Launch: grid (ceil(seq_q / BQ), batch * heads), THREADS threads; arguments (q, k, v,
    scale * log2(e), causal, out)."""
    DIM = head_dim
    DPAD = DIM + 1  # a column d of 32 rows falls in 32 banks
    OC = DIM // TC  # output columns a thread: tc + 8 c

    @cuda.jit(fastmath=True)  # exp2 -> one ex2.approx; no infinities below, so fastmath is safe
    def flash_attention_kernel(q, k, v, scale2, causal, out):
        """Block (blockIdx.x, blockIdx.y = b * heads + h) owns query rows i0 = BQ blockIdx.x ... + 31
        of head h, KV head g = h // (heads // kv_heads). Thread tid: tr, tc = divmod(tid, TC); its rows
        i0 + tr + 16 r (r < RQ), its keys of a tile k0 + tc + 8 c (c < RK), its output columns tc + 8 c
        (c < OC). shift = seq_k - seq_q; kend = seq_k, or with causal min(seq_k, last row + shift + 1):
        tiles at or past kend are never visited.
        1. q_sh (BQ, DPAD) = q rows times scale2 (base-2 logits; 0.0 past seq_q); acc = 0, m = NO_LOGIT,
           l = 0 per row (registers: cuda.local.array with constant indices).
        2. For k0 in range(0, kend, BK): stage k[b, g, k0:k0 + BK] into kv_sh (BK, DPAD) (0.0 past
           seq_k), barrier; s[r, c] = sum_d q_sh[row, d] * kv_sh[key, d]; where the tile crosses kend
           or the diagonal, s = MASKED for key >= kend or (causal and key > row + shift); per row:
           m_new = max(m, s...) over the 8 lanes sharing the row (shfl_xor 1, 2, 4), corr =
           exp2(m - m_new), p = exp2(s - m_new) into p_sh[row, key - k0], l = l corr + sum of its p,
           acc[r, :] *= corr, m = m_new; barrier; stage v rows into kv_sh, barrier; acc[r, c] +=
           p_sh[row, jj] * kv_sh[jj, tc + 8 c] for jj < BK; barrier (the next tile overwrites both).
        3. l summed over the 8 lanes of the row (shfl_xor 1, 2, 4); out[b, h, row, tc + 8 c] = acc /
           l, or 0 where l is 0 (a row that sees no key), for rows < seq_q."""
        raise NotImplementedError("Day 66: stage q; per K/V tile: scores, masks, online softmax (rescale acc), P v, "
                                  "barriers; store acc / l (95 lines)")

    return flash_attention_kernel


_SIG4 = "float32[:, :, :, ::1]"
KERNELS = {
    "flash": (flash_kernel(128), f"void({_SIG4}, {_SIG4}, {_SIG4}, float32, boolean, {_SIG4})"),
}


def flash(q, k, v, causal):
    """FlashAttention forward in FP32: q (batch, heads, seq_q, dim), k and v (batch, kv_heads, seq_k,
    dim) float32 (NumPy in: NumPy out; device arrays in: a device array out), heads a multiple of
    kv_heads, dim 32/64/96/128, any lengths >= 1, causal bottom-right; returns q's shape, float32."""
    check_inputs(q, k, v, causal)
    b, h, seq_q, dim = q.shape
    dq, dk, dv = launch.to_device(q, k, v)
    out = launch.empty(q.shape, np.float32)
    grid = ((seq_q + BQ - 1) // BQ, b * h)
    flash_kernel(dim)[grid, THREADS](dq, dk, dv, float32(LOG2E / math.sqrt(dim)), bool(causal), out)
    return launch.result(out, q, k, v)


def library(q, k, v, causal):
    """torch's scaled_dot_product_attention on the same arrays (float32: torch picks the backend)."""
    return ac.torch_sdpa(q, k, v, causal, backend=None)
