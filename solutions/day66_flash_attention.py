"""Day 66: attention II, the FlashAttention forward pass in FP32 Numba -- day 65's problem, with no limit
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
        # EXERCISE: stage q; per K/V tile: scores, masks, online softmax (rescale acc), P v, barriers; store acc / l
        q_sh = cuda.shared.array((BQ, DPAD), float32)
        kv_sh = cuda.shared.array((BK, DPAD), float32)  # K, then V of the same tile: 16.5 KB at dim 128
        p_sh = cuda.shared.array((BQ, P_PAD), float32)
        s = cuda.local.array((RQ, RK), float32)
        acc = cuda.local.array((RQ, OC), float32)
        m = cuda.local.array(RQ, float32)
        l = cuda.local.array(RQ, float32)
        qa = cuda.local.array(RQ, float32)
        kb = cuda.local.array(RK, float32)
        tid = cuda.threadIdx.x
        tr = tid // TC
        tc = tid - tr * TC
        heads = q.shape[1]
        b = cuda.blockIdx.y // heads
        h = cuda.blockIdx.y - b * heads
        g = h // (heads // k.shape[1])
        seq_q = q.shape[2]
        seq_k = k.shape[2]
        i0 = cuda.blockIdx.x * BQ
        shift = seq_k - seq_q  # bottom-right: row i sees keys j <= i + shift
        kend = seq_k
        if causal:
            kend = max(0, min(seq_k, min(i0 + BQ, seq_q) + shift))  # the last row's window
        for e in range(tid, BQ * DIM, THREADS):  # consecutive threads along dim: coalesced
            r = e // DIM
            c = e - r * DIM
            q_sh[r, c] = q[b, h, i0 + r, c] * scale2 if i0 + r < seq_q else float32(0.0)
        for r in range(RQ):
            m[r] = NO_LOGIT
            l[r] = 0.0
            for c in range(OC):
                acc[r, c] = 0.0

        for k0 in range(0, kend, BK):
            for e in range(tid, BK * DIM, THREADS):
                r = e // DIM
                c = e - r * DIM
                kv_sh[r, c] = k[b, g, k0 + r, c] if k0 + r < seq_k else float32(0.0)
            cuda.syncthreads()  # the K tile (and, the first time, q_sh) is complete
            for r in range(RQ):
                for c in range(RK):
                    s[r, c] = 0.0
            for d in range(DIM):
                for r in range(RQ):
                    qa[r] = q_sh[tr + TR * r, d]  # 4 rows a warp: broadcasts, 4 banks
                for c in range(RK):
                    kb[c] = kv_sh[tc + TC * c, d]  # 8 keys a warp, 8 banks (DPAD)
                for r in range(RQ):
                    for c in range(RK):
                        s[r, c] += qa[r] * kb[c]
            # Only the tile that holds kend and those crossing the diagonal need a mask.
            edge = k0 + BK > kend or (causal and k0 + BK - 1 > i0 + shift)
            for r in range(RQ):
                row = i0 + tr + TR * r
                m_new = m[r]
                for c in range(RK):
                    j = k0 + tc + TC * c
                    if edge and (j >= kend or (causal and j > row + shift)):
                        s[r, c] = MASKED
                    m_new = max(m_new, s[r, c])
                # the 8 lanes tc = 0..7 of a row are neighbours in one warp
                m_new = max(m_new, cuda.shfl_xor_sync(FULL_MASK, m_new, 1))
                m_new = max(m_new, cuda.shfl_xor_sync(FULL_MASK, m_new, 2))
                m_new = max(m_new, cuda.shfl_xor_sync(FULL_MASK, m_new, 4))
                corr = math.exp2(m[r] - m_new)
                part = float32(0.0)
                for c in range(RK):
                    p = math.exp2(s[r, c] - m_new)
                    p_sh[tr + TR * r, tc + TC * c] = p
                    part += p
                l[r] = l[r] * corr + part  # this lane's share of the row sum, on the row's scale
                for c in range(OC):
                    acc[r, c] *= corr  # the online softmax: what was summed at the old max, rescaled
                m[r] = m_new
            cuda.syncthreads()  # p_sh complete; nobody reads the K tile any more
            for e in range(tid, BK * DIM, THREADS):
                r = e // DIM
                c = e - r * DIM
                kv_sh[r, c] = v[b, g, k0 + r, c] if k0 + r < seq_k else float32(0.0)
            cuda.syncthreads()  # the V tile is complete
            for jj in range(BK):
                for r in range(RQ):
                    qa[r] = p_sh[tr + TR * r, jj]
                for c in range(OC):
                    vv = kv_sh[jj, tc + TC * c]
                    for r in range(RQ):
                        acc[r, c] += qa[r] * vv
            cuda.syncthreads()  # between tiles: the next K tile overwrites kv_sh, the next p p_sh

        for r in range(RQ):
            total = l[r]
            total += cuda.shfl_xor_sync(FULL_MASK, total, 1)
            total += cuda.shfl_xor_sync(FULL_MASK, total, 2)
            total += cuda.shfl_xor_sync(FULL_MASK, total, 4)
            inv = float32(1.0) / total if total > float32(0.0) else float32(0.0)
            row = i0 + tr + TR * r
            if row < seq_q:
                for c in range(OC):
                    out[b, h, row, tc + TC * c] = acc[r, c] * inv

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
