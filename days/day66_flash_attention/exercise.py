"""Day 66 exercise: attention II, the FlashAttention forward pass in FP32 Numba -- day 65's problem, with no limit
on the sequence and nothing of size seq^2 anywhere.

v1 materialised  day 65's naive (imported, given): S = scale q k^T to global memory, softmax in place,
                 O = P v: 4 b h seq_q seq_k bytes of scores written, read, written and read again.
v2 flash         a block of 128 threads per (batch, head, 64 query rows): the block's q tile in shared
                 memory, K and V streamed through one 16-key shared tile, the online softmax (running
                 max m and sum l per row; the output accumulator rescaled by exp2(m_old - m_new) each
                 tile), register micro-tiles fed by 16-byte shared loads, the output in registers, one
                 16-byte store a column group at the end. Causal: key tiles above the diagonal are never
                 visited, only those crossing it are masked.
library          torch.nn.functional.scaled_dot_product_attention (float32: torch picks the backend).

Measured on the H200 (make bench, FP32 GEMM peak 51 TFLOP/s in the same run) at (8, 32, 32, 4096, 4096,
128): flash 145.6 ms, 15 TFLOP/s, 30 % of the FP32 peak, 1.95x faster than materialised (283.6 ms);
causal flash 74.9 ms (29 %), 3.79x faster than materialised (284.2 ms); torch SDPA float32 46.4 ms
(93 %), causal 24.0 ms. The PREVIOUS flash kernel (32 query rows a block, 32-key tiles, scalar shared
loads, 2 rows x 4 keys and 2 rows x dim / 8 outputs a thread, 162 registers, 3 blocks an SM) took 272.8
ms (16 %), causal 140.1 ms (15 %): it was shared-bound, ~1.5 FMAs per shared load, one 4-byte word each.

The new design (day 43's register blocking and day 44's wide loads, inside 48 KB of static shared
memory). Shared at dim 128: q 64 x 132 floats (33.8 KB), one K/V tile 16 x 132 (8.4 KB), P 64 x 20 (5
KB): 47.3 KB. Rows of dim + 4 floats: 16-byte aligned for wide.load4 and 4 banks apart, so a warp's
v4 read of its 4 q rows (each a broadcast to 8 lanes) or of its 8 keys covers the 32 banks once.
Thread (tr, tc) = divmod(tid, 8) owns rows tr + 16 r (r < 4), keys tc + 8 c (c < 2) of a score tile,
and output columns 4 tc + 32 c + x (c < dim / 32, x < 4) of its 4 rows (64 accumulators at dim 128).
- S = Q K^T: per 4 d, 4 q + 2 key v4 loads feed 4 x 2 x 4 = 32 FMAs: 5.3 FMAs a load instruction
  (old: 8 FMAs for 6 scalar loads, 1.3); in wavefronts about 0.2 a warp FMA, under the SM's 0.25.
- O += P V: per 4 keys, 4 p v4 loads + 4 x dim / 32 v v4 loads (20 at dim 128) feed 4 rows x 16
  columns x 4 keys = 256 FMAs at dim 128: 12.8 FMAs a load instruction (old: 1.8).
- The softmax: the row's max and sum over the 8 lanes that share it, 3 shfl_xor each; 8 exp2 and 64
  rescale multiplies a thread per 16-key tile against 2 x 1024 FMAs: ~4 % overhead.
- Registers: 64 accumulators, 8 scores, 8 + 16 fragment words, m and l: ptxas takes 154 at dim 128
  under launch_bounds(128, 3) (the compiler report; no stack, no spills; capped at 128 for 4 blocks
  it spills), so 3 blocks (12 warps) an SM, as many as registers allow and fewer than shared memory
  would (4).
- 4 barriers per 16-key tile, ~4096 FMAs a thread between consecutive K tiles; K and V are read once
  per 64 query rows (half the old L2 traffic): 64 x 1.07 GB = 69 GB from L2 at the issue's shape.
Expected: the inner loops no longer bound by shared memory but by issue (FMAs ~80 % of the
instructions), minus the softmax, barriers and the 12-warp occupancy: ~35-45 % of the FP32 peak,
~95-125 ms at the issue's shape (2.2-2.9x faster than the old flash). Measured: 30 %, 145.6 ms, 1.87x
the old flash, short of the estimate (why: not measured apart). FP32 on CUDA cores stays well behind
torch (which uses TF32 tensor cores where allowed) and day 67's tensor cores.

exp is exp2 with log2(e) folded into the query's scale (day 73), under fastmath (ex2.approx); the
masks and the running max use finite sentinels (no infinities under fastmath).

Napkin math at the issue's shape (8, 32 heads, seq 4096, dim 128): 4 b h s^2 d = 2.2 TFLOP, 1.1
causal; at ~51 TFLOP/s (cuBLAS FP32 GEMM) 43 ms. Bytes: q and out once (1.07 GB), K and V once per
64-row query tile: 64 x 1.07 GB = 69 GB from L2 (a (batch, head)'s K and V are 4 MB, and its 64
query tiles run side by side), far less from DRAM. materialised moves 69 GB of scores through DRAM and
holds 17 GB of them.

What you write (each raises NotImplementedError with its hint until you do):
  flash_kernel.flash_attention_kernel  stage q; per K/V tile: v4 score tile, masks, online softmax (rescale acc), v4
                                       P v, barriers; store (100 lines)
Everything else in this file is given. Grade with:  make check DAY=66
"""

import functools
import math

import numpy as np

from course import DEVICE, cuda, launch, wide
from numba import float32  # numba names only after the course import
from solutions import attention_common as ac
from solutions.day25_reduction_last_warp import FULL_MASK
from solutions.day65_attention_materialised import LARGE_FLOOR, LARGE_RTOL, check_inputs, make_inputs  # noqa: F401
from solutions.day65_attention_materialised import naive as materialised  # noqa: F401  (v1: day 65's naive, given)

TITLE = "Attention II: FlashAttention forward (FP32)"
MEMORY_SPACE = "shared + register"
VERSIONS = ("materialised", "flash")
# The hard inputs (attention_common): seq 1; seq_q < seq_k and seq_q > seq_k causal (rows that see no
# key, a row that sees one); GQA 4/2, MQA 4/1; lengths off the 32-key and 32-row tiles (several key
# tiles: the rescale matters); one dim-128 case. Scores near +-1e4: LARGE_SIZES, at LARGE_RTOL of the scale.
TEST_SIZES = ((1, 1, 1, 1, 1, 32, False), (1, 1, 1, 1, 1, 32, True), (1, 4, 2, 5, 37, 32, True),
              (1, 2, 1, 37, 5, 32, True), (1, 2, 2, 20, 20, 64, True), (1, 4, 1, 9, 37, 32, False),
              (1, 1, 1, 9, 33, 128, True))
LARGE_SIZES = ((1, 2, 1, 9, 45, 64, False, "large"), (1, 2, 2, 34, 34, 32, True, "large"))
BENCH_SIZES = ((8, 32, 32, 4096, 4096, 128, False), (8, 32, 32, 4096, 4096, 128, True))
BOUND = "compute"
RTOL = ac.RTOL["float32"]
ERROR_FLOOR = ac.ERROR_FLOOR["float32"]
reference = ac.reference
traffic = ac.traffic

BQ = 64  # query rows a block: K and V are read once per 64 rows (day 65's blocks: once per 16)
BK = 16  # keys a tile: what fits beside the 64 q rows in 48 KB of static shared memory
THREADS = 128
TC = 8  # threads across a tile (keys tc + 8 c; output columns 4 tc + 32 c + x); 16 down (rows tr + 16 r)
TR = THREADS // TC
RQ = BQ // TR  # rows a thread: 4
RK = BK // TC  # scores a thread per row: 2
VEC = wide.WIDTH  # 4 floats: one 16-byte shared load (ld.shared.v4)
P_PAD = BK + VEC  # p_sh row stride 20: rows tr = 0..3 of a warp start 20 words apart, distinct banks for v4
BLOCKS_PER_SM = 3  # launch_bounds (128, 3): ptxas keeps a thread to 65536 / 384 = 170 registers (4 blocks: 128, spills)
# The simulator's jit takes no launch bounds (no registers to budget); the GPU and the compiler report do.
_BOUNDS = {"launch_bounds": (THREADS, BLOCKS_PER_SM)} if DEVICE.kind != "sim" else {}
LOG2E = 1.4426950408889634
NO_LOGIT = np.float32(-1.0e30)  # the running max before any key: finite, so exp2(m_old - m_new) is never NaN
MASKED = np.float32(-2.0e30)  # a masked score: exp2(MASKED - m) = 0 for any m >= NO_LOGIT


@functools.cache
def flash_kernel(head_dim: int):
    """The flash kernel for one head size (a constant: the output columns a thread holds unroll into
    registers). Launch: grid (ceil(seq_q / BQ), batch * heads), THREADS threads; arguments (q, k, v,
    scale * log2(e), causal, out)."""
    DIM = head_dim
    DPAD = DIM + VEC  # row stride dim + 4: 16-byte rows, and rows 4 banks apart (8 rows fill the 32 banks)
    OV = DIM // (TC * VEC)  # 16-byte column groups a thread: columns 4 tc + 32 c + x (c < OV, x < 4)
    OC = OV * VEC  # output columns a thread, per row

    @cuda.jit(fastmath=True, **_BOUNDS)  # exp2 -> one ex2.approx; no infinities below, so fastmath is safe
    def flash_attention_kernel(q, k, v, scale2, causal, out):
        """Block (blockIdx.x, blockIdx.y = b * heads + h) owns query rows i0 = BQ blockIdx.x ... + 63
        of head h, KV head g = h // (heads // kv_heads). Thread tid: tr, tc = divmod(tid, TC); its rows
        i0 + tr + 16 r (r < RQ = 4), its keys of a tile k0 + tc + 8 c (c < RK = 2), its output columns
        4 tc + 32 c + x (c < dim / 32, x < 4). shift = seq_k - seq_q; kend = seq_k, or with causal
        min(seq_k, last row + shift + 1): tiles at or past kend are never visited.
        Shared (alignment=16, rows of dim + 4 floats): q_sh (BQ, dim + 4), kv_sh (BK, dim + 4), p_sh
        (BQ, BK + 4); every inner-loop read is a 16-byte wide.load4.
        1. q_sh = q rows times scale2 (base-2 logits; 0.0 past seq_q); acc = 0, m = NO_LOGIT, l = 0 per
           row (registers: cuda.local.array with constant indices).
        2. For k0 in range(0, kend, BK): stage k[b, g, k0:k0 + BK] into kv_sh (0.0 past seq_k), barrier;
           s[r, c] = sum_d q_sh[row, d] kv_sh[key, d], 4 d a step (a v4 load of each row and key, 32
           FMAs); where the tile crosses kend or the diagonal, s = MASKED for key >= kend or (causal and
           key > row + shift); per row: m_new = max(m, s...) over the 8 lanes sharing the row (shfl_xor
           1, 2, 4), corr = exp2(m - m_new), p = exp2(s - m_new) into p_sh[row, key - k0], l = l corr +
           sum of its p, acc[r, :] *= corr, m = m_new; barrier; stage v rows into kv_sh, barrier; per 4
           keys jj: p of the 4 rows (v4), then per key the thread's v columns (v4 each), acc += p v;
           barrier (the next tile overwrites both).
        3. l summed over the 8 lanes of the row (shfl_xor 1, 2, 4); out[b, h, row, 4 tc + 32 c:+4] =
           acc / l (a 16-byte store), or 0 where l is 0 (a row that sees no key), for rows < seq_q."""
        raise NotImplementedError("Day 66: stage q; per K/V tile: v4 score tile, masks, online softmax (rescale acc), "
                                  "v4 P v, barriers; store (100 lines)")

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


# The unit's fixed interface: optimized(q, k, v, causal) is the day's best kernel.
naive = materialised
optimized = flash


def library(q, k, v, causal):
    """torch's scaled_dot_product_attention on the same arrays (float32: torch picks the backend)."""
    return ac.torch_sdpa(q, k, v, causal, backend=None)
