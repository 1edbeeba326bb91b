"""Day 67 exercise: attention III -- FlashAttention-2's forward on the tensor cores (float16 in and out, fp32 sums).

The problem is attention_common's: out = softmax(q k^T / sqrt(dim)) v per (batch, query head), GQA
(query head h reads kv head h // (heads / kv_heads)), bottom-right causal masking, rows that see no
key are zeros, any seq_q, seq_k >= 1, head dims 32, 64, 96, 128; here q, k, v and out are float16 and
every sum is float32. Both versions share ONE decomposition (FlashAttention-2's):

    a block of 4 warps per 64 query rows of one (batch, head); warp w owns rows 16 w .. 16 w + 15;
    the K/V tiles (64 keys x dim) stream through shared memory; in a warp, lane l (g = l // 4,
    t = l % 4) holds the m16n8k16 accumulator layout: rows g and g + 8, columns 2t and 2t + 1 of
    every 8-column n-tile, for S = Q K^T (8 n-tiles of a 64-key tile: 32 floats) and for O
    (dim / 8 n-tiles: dim / 2 floats); so a row's 64 scores sit in the 4 lanes of one quad and the
    row max and row sum are reduced with two xor shuffles (masks 1 and 2); the online softmax runs
    in base 2 (exp2 of scores pre-scaled by log2(e) / sqrt(dim)); P is rounded to float16 before
    P V (as the mma needs, and as FlashAttention does).

v1 fragments     a Numba kernel (FP32 FMAs on float16 loads) with exactly that decomposition: Q, K, V
                 tiles in shared memory as float16, each lane computing its own accumulator elements
                 of S and O in FP32, P rounded to float16 through a per-warp shared tile (the one
                 step the tensor cores do in registers), the quad shuffles of the mma version. The
                 simulator grades it: it is the layout, run without a GPU.
v2 tensor_cores  a CuPy RawKernel in CUDA C (flash_source(dim, causal, pieces)): Q fragments loaded
                 once by ldmatrix and kept in registers; K/V tiles by 16-byte cp.async, double-buffered
                 and XOR-swizzled; S = Q K^T and O += P V by mma.sync.aligned.m16n8k16.row.col.f32.f16
                 .f16.f32 (K's (keys, dim) tile is already the 'col' B operand: ldmatrix; V's needs
                 ldmatrix .trans); P converted to f16x2 registers that ARE the A fragments of the P V
                 mma (no shared round trip); O scaled by 1 / l and stored as 16-byte rows through the
                 warp's shared Q tile. A template with four named pieces days 68-70 replace.

Napkin math (the bench shape: batch 8, 32 heads, seq 4096, dim 128, fp16). FLOPs 4 * 8 * 32 * 4096^2
* 128 = 2.2 TFLOP non-causal (1.1 causal, only the scored pairs counted); bytes 4 * 8 * 32 * 4096 *
128 * 2 = 268 MB: 8,200 FLOPs a byte, compute-bound by three orders of magnitude. Per block and K/V
tile: 4 * 64 * 64 * 128 = 2.1 MFLOP on 32 KB loaded from L2 (64 FLOPs a byte of L2: fine). Per warp
and tile: Q K^T is dim/16 x 8 = 64 mma and P V 4 x dim/8 = 64 mma (4096 FLOPs each); the operands
come from shared memory by ldmatrix: 32 x4 for K and 32 x4.trans for V, each 512 bytes = 4 wavefronts,
so 256 wavefronts for 128 mma: 2 wavefronts an mma (16 rows a warp: every warp reads the whole K and
V tile; FlashAttention-2 pays the same). Shared memory serves one wavefront a cycle per SM, so the
ldmatrix side caps the kernel at 0.5 mma a cycle per SM, 132 SMs * 1.83 GHz * 0.5 * 4096 = ~495
TFLOP/s; mma.sync's own ceiling on Hopper is ~600-660 (day 47); the softmax adds per 64 x 64 tile
4096 exp2 (MUFU: 16 a cycle per SM, 256 cycles) beside ~750 cycles of mma, overlapped across warps.
Registers a thread: O accumulators dim/2 floats (64), S 32 floats, Q fragments dim/4 (32), P 16 (as
f16x2, made from S in place), the row max and sum 4, addresses ~20: ~170 at dim 128 (nvcc's report:
the test), under 255, so two blocks of 128 threads fit an SM's 64 K registers (8 warps) and their
shared memory too: (4 x 16 Q rows + 2 stages x 64 K rows + 2 x 64 V rows) x dim x 2 bytes = 80 KB at
dim 128 (dynamic, opted in above 48 KB), 160 KB of the 227. Grid 64 x 32 x 8 = 16,384 blocks: 62
waves of 264. Target (issue): >= 50 % of SDPA's flash backend, measured in the same run, aim 70 %.
Causal: this day visits every key tile and masks element-wise each tile that crosses (or lies beyond)
the diagonal (tile_needs_mask); the tiles past it are computed and then thrown away, so the causal row
pays the non-causal time for half the counted FLOPs (~50 % of its non-causal rate, under the 50 %
target: day 68 skips them).
Measured on the H200 (cuBLAS FP16 GEMM 761 TFLOP/s in the same run; % of that peak):
  non-causal  tensor_cores 7,563.6 us, 290.7 TFLOP/s, 38.2 % of peak, 186.6x fragments (1.41 s, 1.6
              TFLOP/s); SDPA flash 6,050.7 us, 363.4 TFLOP/s, 47.7 %. tensor_cores = 80 % of SDPA's
              rate: the target (>= 50 %) met and the aim (70 %) met. 59 % of the ~495 ldmatrix cap above.
  causal      tensor_cores 7,806.5 us, 140.9 TFLOP/s, 18.5 %, 130.7x fragments; SDPA flash 3,263.1 us,
              337.0 TFLOP/s. tensor_cores = 42 % of SDPA's rate: the target missed by 8 points, as the
              napkin math says: 1.03x its non-causal time for half the counted FLOPs (48 % of its
              non-causal rate), because this day computes the masked tiles that day 68 skips.
  GQA, 8 kv heads, causal: 7,803.9 us, 140.9 TFLOP/s, the same as 32 (SDPA 3,260.4 us): day 69.

Edges: cp.async copies 16-byte chunks (8 halves): every stride (batch, head, row) must be a multiple
of 8 elements and every base 16-byte aligned (the host checks; C-contiguous CuPy arrays of any of
these dims are). Chunks of rows >= seq_q or keys >= seq_k are zero-filled (src-size 0, pointer clamped
to the array's start): zero V rows add nothing to P V even where a caller's padding holds NaN (0 x NaN
would not); scores of keys >= seq_k are set to -inf. Rows >= seq_q are never stored. A row that sees
no key keeps m = -inf: its exponents are taken against 0 (never -inf - -inf = NaN), l stays 0 and the
row is stored as zeros.

library: torch SDPA's flash backend on the same float16 tensors (attention_common.torch_sdpa).

What you write (each raises NotImplementedError with its hint until you do):
  fragments_kernel.flash_fragments_kernel  q_s; per 64-key tile: k_s, v_s, S in the mma layout, mask, quad softmax,
                                           P fp16, O += P V (71 lines)
  flash_source                             write the core of flash_fwd (the docstring is its spec) after the given
                                           helpers, types and pieces (6 lines)
Everything else in this file is given. Grade with:  make check DAY=67
"""

import dataclasses
import functools
import math
from collections.abc import Callable

import numpy as np

from course import ON_GPU, cuda, launch
from numba import float32  # numba names only after the course import
from numba.types import float16
from solutions import attention_common

TITLE = "Attention III: FlashAttention on tensor cores"
MEMORY_SPACE = "shared + register"
VERSIONS = ("fragments", "tensor_cores")
SIM_VERSIONS = ("fragments",)  # tensor_cores is CUDA C (mma.sync): the simulator cannot run it
BOUND = "compute"
PEAK_DTYPE = "float16"
RTOL = attention_common.RTOL["float16"]  # float16 out (2^-11 of each output) and P rounded to fp16
ERROR_FLOOR = attention_common.ERROR_FLOOR["float16"]
# (batch, heads, kv_heads, seq_q, seq_k, dim, causal[, kind]): the unit's hard inputs, simulator-sized
TEST_SIZES = (
    (1, 1, 1, 1, 1, 32, False),  # one query, one key
    (1, 1, 1, 1, 1, 64, True),
    (1, 2, 1, 5, 70, 32, True),  # fewer queries than keys: bottom-right; two key tiles, the last of 6 keys
    (1, 1, 1, 70, 9, 32, True),  # more queries than keys: rows 0..60 see no key (zeros); two query blocks
    (1, 4, 2, 9, 9, 32, True),  # GQA 4 / 2; row 0's causal window holds one key
    (1, 4, 1, 3, 65, 32, False),  # MQA; the last key tile holds one key
    (1, 1, 1, 8, 130, 32, False),  # three key tiles: a row's max rises from tile to tile
    (1, 1, 1, 24, 40, 64, False, "large"),  # scores ~1e4 before scaling: only a running max survives
    (1, 1, 1, 8, 24, 128, True),
    (1, 1, 1, 16, 40, 96, False),
)
BENCH_SIZES = (
    (8, 32, 32, 4096, 4096, 128, False),
    (8, 32, 32, 4096, 4096, 128, True),
    (8, 32, 8, 4096, 4096, 128, True),  # GQA 4: K/V re-read by 4 heads' blocks (day 69 loads it once)
)
HEAD_DIMS = attention_common.HEAD_DIMS  # 32, 64, 96, 128

BLOCK_M = 64  # query rows of one head a block: 4 warps of 16 (the m of m16n8k16)
BLOCK_N = 64  # keys a K/V tile
WARPS = 4
THREADS = 32 * WARPS
WARP_ROWS = 16
FULL_MASK = 0xFFFFFFFF
LOG2E = 1.4426950408889634
NEG_INF = np.float32(-math.inf)  # float32, not a Python float: Numba would carry the softmax in float64
ZERO = np.float32(0.0)

reference = attention_common.reference
traffic = attention_common.traffic


def bench_skip(version, n):
    """The Numba fragments kernel is FP32 work on one warp's emulated fragments: at the 2.2 TFLOP bench
    shapes it took 1.0-1.4 s a call on the H200 (0.1-0.2 % of the FP16 peak), so the bench leaves it out
    there; the simulator grades it, and its tests run it on the GPU at smaller sizes."""
    b, h, _kvh, sq, sk, d, causal, _kind = attention_common.geometry(n)
    flops = 4 * b * h * d * attention_common.pairs(sq, sk, causal)
    if version == "fragments" and flops > 2e11:
        return f"{flops / 1e12:.1f} TFLOP of FP32 work on emulated fragments: over a second a call"
    return None


def make_inputs(n, seed: int = 0):
    """(q, k, v, causal) in float16 for size n (attention_common.make_inputs)."""
    return attention_common.make_inputs(n, seed, np.float16)


def check_inputs(q, k, v, causal) -> None:
    attention_common.check_inputs(q, k, v, causal, np.float16, HEAD_DIMS)


# ---- v1: the decomposition in Numba (FP32 FMAs, simulator-graded) ------------------------------------


@functools.cache
def fragments_kernel(head_dim: int):
    """The Numba kernel for one head dim. Launch: grid (ceil(seq_q / 64), heads, batch), 128 threads;
    arguments (q, k, v, out, scale_log2 = log2(e) / sqrt(dim), causal)."""
    D = head_dim
    SN = BLOCK_N // 8  # 8-column n-tiles of S: 8
    DN = D // 8  # 8-column n-tiles of O

    @cuda.jit(fastmath=True)  # exp2 -> one ex2.approx, as the CUDA C uses
    def flash_fragments_kernel(q, k, v, out, scale_log2, causal):
        """One block per (query block mb = blockIdx.x, head h = blockIdx.y, batch b = blockIdx.z),
        kv head h // (heads // kv_heads). warp = tid // 32 owns block rows 16 warp .. 16 warp + 15;
        lane: g = lane // 4, t = lane % 4; its two rows r0 = 16 warp + g, r1 = r0 + 8 (query rows
        i = 64 mb + r). Accumulators (cuda.local.array, indexed [n-tile, e]): s (8, 4), o (DN, 4);
        element e of n-tile nt is row (r0 if e < 2 else r1), column 8 nt + 2 t + e % 2 (of the key
        tile for s, of dim for o). Running max m0, m1 (base 2: scores times scale_log2) = -inf, sums
        l0, l1 = 0 (this lane's columns only).
        1. q_s (64, D) float16 shared: the block's rows (0 past seq_q), loaded by all threads.
        2. For each key tile n0 = 0, 64, ... < seq_k: k_s, v_s (64, D) float16 (0 past seq_k);
           cuda.syncthreads(); s[nt, e] = sum_d float32(q_s[r, d]) * float32(k_s[c, d]) for its
           (r, c); keys c + n0 >= seq_k, and with causal keys > i + seq_k - seq_q, get -inf;
           per row: the lane's max over its 16 columns, then mx = max(mx, shfl_xor(mx, 1)),
           max(mx, shfl_xor(mx, 2)) (the quad: lanes 4g .. 4g + 3 hold the row's 64 columns);
           m_new = max(m, mx * scale_log2); m_use = 0 if m_new == -inf else m_new; alpha =
           exp2(m - m_use); p = exp2(s * scale_log2 - m_use); l = l alpha + sum p; o[.., row's e]
           *= alpha; m = m_new. Write p as float16 to p_s (64, 64) at (r, c) (the mma's A operand:
           P in fp16); cuda.syncwarp(); o[dn, e] += float32(p_s[r, j]) * float32(v_s[j, 8 dn + 2 t
           + e % 2]) over the tile's 64 keys j; cuda.syncthreads().
        3. l summed over the quad (shfl_xor 1 and 2); out[b, h, i, col] = float16(o / l) (0 where
           l == 0: a row that saw no key) for rows i < seq_q."""
        q_s = cuda.shared.array((BLOCK_M, D), float16)  # the block's query rows
        k_s = cuda.shared.array((BLOCK_N, D), float16)  # (keys, dim): the B operand of Q K^T as is
        v_s = cuda.shared.array((BLOCK_N, D), float16)  # (keys, dim): the B operand of P V
        p_s = cuda.shared.array((BLOCK_M, BLOCK_N), float16)  # P in fp16: the tensor cores keep it in registers
        seq_q = q.shape[2]
        seq_k = k.shape[2]
        mb = cuda.blockIdx.x
        h = cuda.blockIdx.y
        b = cuda.blockIdx.z
        kvh = h // (q.shape[1] // k.shape[1])  # GQA: the group's K/V head
        tid = cuda.threadIdx.x
        warp = tid // 32
        lane = tid % 32
        g = lane // 4
        t = lane % 4
        row0 = mb * BLOCK_M
        shift = seq_k - seq_q  # bottom-right causal: query i sees keys j <= i + shift
        s = cuda.local.array((SN, 4), float32)
        o = cuda.local.array((DN, 4), float32)
        for dn in range(DN):
            for e in range(4):
                o[dn, e] = ZERO
        m0 = NEG_INF  # running max of row r0 (base 2), then of r1
        m1 = NEG_INF
        l0 = ZERO  # running sum of this lane's 16 columns of row r0, then of r1
        l1 = ZERO
        raise NotImplementedError("Day 67: q_s; per 64-key tile: k_s, v_s, S in the mma layout, mask, quad softmax, P "
                                  "fp16, O += P V (71 lines)")
        l0 += cuda.shfl_xor_sync(FULL_MASK, l0, 1)  # the row's sum over its 4 lanes
        l0 += cuda.shfl_xor_sync(FULL_MASK, l0, 2)
        l1 += cuda.shfl_xor_sync(FULL_MASK, l1, 1)
        l1 += cuda.shfl_xor_sync(FULL_MASK, l1, 2)
        inv0 = float32(1.0) / l0 if l0 > ZERO else ZERO  # l == 0: the row saw no key: zeros
        inv1 = float32(1.0) / l1 if l1 > ZERO else ZERO
        for e in range(4):
            i = row0 + warp * WARP_ROWS + g + 8 * (e // 2)
            inv = inv0 if e < 2 else inv1
            if i < seq_q:
                for dn in range(DN):
                    out[b, h, i, 8 * dn + 2 * t + e % 2] = float16(o[dn, e] * inv)

    return flash_fragments_kernel


_A4 = "float16[:, :, :, ::1]"
_SIG = f"void({_A4}, {_A4}, {_A4}, {_A4}, float32, boolean)"
KERNELS = {"fragments": (fragments_kernel(64), _SIG)}


def fragments(q, k, v, causal):
    check_inputs(q, k, v, causal)
    b, h, sq, d = q.shape
    d_q, d_k, d_v = launch.to_device(q, k, v)
    out = launch.empty(q.shape, np.float16)
    scale_log2 = np.float32(LOG2E / math.sqrt(d))
    fragments_kernel(d)[(launch.blocks(sq, BLOCK_M), h, b), THREADS](d_q, d_k, d_v, out, scale_log2, bool(causal))
    return launch.result(out, q, k, v)


# ---- v2: the tensor-core kernel, a CUDA C template ----------------------------------------------------

CHUNK = 8  # halves in one 16-byte cp.async / ldmatrix row / output store


def default_grid(batch: int, heads: int, kv_heads: int, seq_q: int) -> tuple:
    """Piece (a), host side: the grid the default block_info expects: (query blocks, heads, batch)."""
    return (-(-seq_q // BLOCK_M), heads, batch)


# Piece (a): the block -> (batch, head, first query row) mapping, and with it the block order.
BLOCK_MAP = r"""
// Piece (a) BLOCK_MAP: which (batch, query head, query rows) this block computes. Default: grid
// (ceil(seq_q / BLOCK_M), heads, batch); blockIdx.x is the query block, in launch order (day 68
// reverses it, longest first). row0 is the first query row of the block inside its sequence.
__device__ __forceinline__ BlockInfo block_info(const FlashParams& p) {
    return BlockInfo{(int)blockIdx.z, (int)blockIdx.y, (int)blockIdx.x * BLOCK_M};
}
"""

# Piece (b): which key tiles a block visits, and which of them need the element-wise mask.
KEY_TILES = r"""
// Piece (b) KEY_TILES: the key tiles [begin, end) a block with query rows row_lo..row_hi (inside the
// sequence, row_hi < s.seq_q) visits, and which need the element-wise mask. Default: every tile,
// nothing skipped (day 68 ends the loop at the diagonal); a tile is masked when it holds keys past
// seq_k (the last, partial one) or, with CAUSAL, any key past the block's first row's window
// (bottom-right: row i sees keys j <= i + seq_k - seq_q): the tile crosses or lies beyond the diagonal.
__device__ __forceinline__ KeyTiles key_tiles(const FlashParams& p, const SeqInfo& s, int row_lo, int row_hi) {
    return KeyTiles{0, (s.seq_k + BLOCK_N - 1) / BLOCK_N};
}
__device__ __forceinline__ bool tile_needs_mask(const FlashParams& p, const SeqInfo& s, int row_lo, int row_hi,
                                                int tile) {
    const int last_key = tile * BLOCK_N + BLOCK_N - 1;
    return last_key >= s.seq_k || (CAUSAL && last_key > row_lo + s.seq_k - s.seq_q);
}
"""

# Piece (c): the warp -> (query head, first query row) mapping within a block.
WARP_MAP = r"""
// Piece (c) WARP_MAP: the query head and the first of the 16 query rows warp w computes. Default:
// the block's head, rows row0 + 16 w. Each warp loads its own Q rows and stores its own output rows,
// so a warp may take another head of the same GQA group (day 69: the group's heads in one block, one
// K/V tile load for all of them); the K/V head is always blk.head / p.group.
__device__ __forceinline__ WarpInfo warp_info(const FlashParams& p, const BlockInfo& blk, int warp) {
    return WarpInfo{blk.head, blk.row0 + WARP_ROWS * warp};
}
"""

# Piece (d): per-sequence lengths and offsets.
SEQ_INFO = r"""
// Piece (d) SEQ_INFO: where sequence `batch` starts (q_row0 rows into q and out, k_row0 into k and v,
// on top of the batch strides) and its lengths. Default: every sequence seq_q x seq_k at row 0 of its
// batch slice; day 70 reads p.cu_seqlens_q / p.cu_seqlens_k (and passes batch strides 0).
__device__ __forceinline__ SeqInfo seq_info(const FlashParams& p, int batch) {
    return SeqInfo{0, 0, p.seq_q, p.seq_k};
}
"""


@dataclasses.dataclass(frozen=True)
class FlashPieces:
    """The replaceable parts of the tensor-core kernel (each a CUDA C string defining the functions its
    default defines, with the same signatures), the host's grid for piece (a), and BLOCK_ROWS (query
    rows of one head a block covers: row_hi = min(row0 + BLOCK_ROWS, seq_q) - 1, passed to piece (b))."""
    block_map: str = BLOCK_MAP
    key_tiles: str = KEY_TILES
    warp_map: str = WARP_MAP
    seq_info: str = SEQ_INFO
    grid: Callable = default_grid
    block_rows: int = BLOCK_M


PIECES = FlashPieces()

# Given: day 47's inline-PTX helpers (proven on the H200) plus the half-pack and exp2 ones.
PTX_HELPERS = r"""
// The generic address of a __shared__ pointer as the 32-bit shared-window address PTX wants.
__device__ __forceinline__ unsigned smem_u32(const void* p) {
    unsigned a;
    asm("{ .reg .u64 u; cvta.to.shared.u64 u, %1; cvt.u32.u64 %0, u; }" : "=r"(a) : "l"(p));
    return a;
}

// 16 bytes global -> shared, not through registers (L1 bypassed: .cg); src_bytes 0 reads nothing and
// writes 16 zero bytes.
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(src_bytes)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory"); }

// Four 8 x 8 b16 matrices; lanes 8 i .. 8 i + 7 give the row addresses of matrix i; lane l receives
// in r[i] row l / 4, elements 2 (l % 4) and 2 (l % 4) + 1 of matrix i (low half: the first).
__device__ __forceinline__ void ldmatrix_x4(unsigned r[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
// The same with each matrix transposed: lane l receives column l / 4, rows 2 (l % 4) and 2 (l % 4) + 1.
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned r[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// D = A B + D on a 16 x 8 tile, k 16. Lane l, g = l / 4, t = l % 4:
//   A (row-major 16 x 16): a0 = A[g][2t, 2t+1], a1 = A[g+8][2t, 2t+1], a2 = A[g][2t+8, 2t+9], a3 = A[g+8][2t+8, 2t+9]
//   B ("col", 16 x 8):     b0 = B[2t, 2t+1][g],  b1 = B[2t+8, 2t+9][g]
//   C, D (16 x 8, f32):    c0, c1 = C[g][2t, 2t+1],  c2, c3 = C[g+8][2t, 2t+1]
// (two halves a register: the lower column or k in the low 16 bits)
__device__ __forceinline__ void mma16816(float c[4], const unsigned a[4], unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats rounded to f16 and packed: lo in the low 16 bits (PTX puts its first source in the high half).
__device__ __forceinline__ unsigned pack_half2(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// 2^x in one MUFU instruction (ex2.approx(-inf) = +0).
__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}
"""

# Given: the types the pieces speak in.
TYPES = r"""
struct FlashParams {
    const unsigned short* q; const unsigned short* k; const unsigned short* v; unsigned short* o;
    const int* cu_seqlens_q; const int* cu_seqlens_k;  // day 70 (a 1-int dummy otherwise)
    int batch, heads, kv_heads, group, seq_q, seq_k;     // group = heads / kv_heads
    long long q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, v_sb, v_sh, v_sr, o_sb, o_sh, o_sr;  // strides, elements
    float scale_log2;                                    // log2(e) / sqrt(HEAD_DIM)
};
struct SeqInfo { int q_row0, k_row0, seq_q, seq_k; };
struct BlockInfo { int batch, head, row0; };
struct WarpInfo { int head, row0; };
struct KeyTiles { int begin, end; };
"""


def flash_source(dim: int = 128, causal: bool = False, pieces: FlashPieces = PIECES) -> str:
    """The CUDA C of the tensor-core kernel for one (head dim, causal, pieces) configuration:

        extern "C" __global__ void flash_fwd(const unsigned short* q, const unsigned short* k,
            const unsigned short* v, unsigned short* o, const int* cu_seqlens_q, const int* cu_seqlens_k,
            int batch, int heads, int kv_heads, int seq_q, int seq_k,
            long long q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, v_sb, v_sh, v_sr, o_sb, o_sh, o_sr,
            float scale_log2)

    launched with 128 threads, the grid pieces.grid(batch, heads, kv_heads, seq_q), and
    flash_smem_bytes(dim) of dynamic shared memory. Pointers are float16 bits; element (b, h, i, d) of
    q is q[b q_sb + h q_sh + i q_sr + d] (likewise k, v, o with their strides): every stride a multiple
    of 8 elements and every base 16-byte aligned. scale_log2 = log2(e) / sqrt(dim).

    Compile-time constants (#define): HEAD_DIM (32, 64, 96, 128), CAUSAL (0/1), BLOCK_M 64, BLOCK_N 64,
    WARPS 4, WARP_ROWS 16, BLOCK_ROWS (pieces.block_rows); CHUNKS = HEAD_DIM / 8 (16-byte chunks a
    row). One compiled kernel per configuration (the host caches it by source).

    The template. The source is TYPES (FlashParams, SeqInfo, BlockInfo, WarpInfo, KeyTiles), then the
    four pieces, each a CUDA C string with fixed signatures (the defaults: BLOCK_MAP, KEY_TILES,
    WARP_MAP, SEQ_INFO above), then the core, which only calls them:
      (a) block_info(p) -> {batch, head, row0}: the block's (batch, first query head, first query row);
          default blockIdx.z, blockIdx.y, 64 blockIdx.x; host side pieces.grid.
      (b) key_tiles(p, s, row_lo, row_hi) -> {begin, end} and tile_needs_mask(p, s, row_lo, row_hi,
          tile): default every tile 0 .. ceil(seq_k / 64), masked where it holds a key >= seq_k or,
          causal, a key beyond row_lo's window (row_lo = row0, row_hi = min(row0 + BLOCK_ROWS,
          seq_q) - 1). The core masks element-wise only the tiles this says, so any skip a later day
          makes must stay exact.
      (c) warp_info(p, blk, warp) -> {head, row0}: the query head and first of the 16 rows of a warp;
          default blk.head, blk.row0 + 16 warp.
      (d) seq_info(p, batch) -> {q_row0, k_row0, seq_q, seq_k}: default 0, 0, p.seq_q, p.seq_k.

    The core. The block returns at once if row0 >= seq_q (before any barrier). Shared memory (dynamic,
    halves): 4 warps x 16 Q rows, then 2 stages of K (64 x HEAD_DIM), then 2 of V; a row of any tile
    is CHUNKS 16-byte chunks, chunk c of row r at chunk swz(r, c) = c ^ (r & 7) when CHUNKS % 8 == 0,
    c ^ ((r >> 1) & 3) otherwise (dims 32, 96): each 8-row ldmatrix phase on 8 bank groups.
    1. Each warp cp.asyncs its 16 Q rows (zero past seq_q); the block its first K/V tile (zero past
       seq_k); commit; wait_group 0; __syncthreads(); the warp's Q fragments qf[HEAD_DIM / 16][4] by
       ldmatrix.x4 (lane l: row l % 16, chunk 2 kc + l / 16) into registers for the whole loop.
    2. Per key tile j in [begin, end) (stage (j - begin) & 1): except on the first, wait_group 0 and
       __syncthreads() (tile j is in; every warp finished tile j - 1, whose stage the next load
       refills); cp.async tile j + 1 into the other stage; commit (even when empty).
       S: float s[8][4] = 0; per 16-dim step kc and key pair np: ldmatrix.x4 (no .trans: the (key,
       dim) tile is B's 'col' layout) at key 16 np + l % 8 + 8 (l / 16), chunk 2 kc + (l / 8) % 2:
       registers {b0, b1} of n-tile 2 np then 2 np + 1; two mma.
       Mask (tile_needs_mask): key = 64 j + 8 nt + 2 t + e % 2 of row wi.row0 + g + 8 (e / 2) set to
       -inf when key >= seq_k or (CAUSAL) key > row + seq_k - seq_q.
       Online softmax in base 2 on s, per row half: quad_max (shfl_xor 1, 2), m_new = max(m, mx
       scale_log2), m_use = m_new or 0 if -inf, alpha = exp2(m - m_use), s = exp2(s scale_log2 -
       m_use), l = l alpha + (this lane's) sum, o *= alpha.
       P V: per 16-key step kk the A fragment is {pack(s[2kk][0], s[2kk][1]), pack(s[2kk][2],
       s[2kk][3]), pack(s[2kk+1][0], s[2kk+1][1]), pack(s[2kk+1][2], s[2kk+1][3])} (the accumulator
       layout of n-tiles 2kk, 2kk+1 is the A layout of a 16-deep k step); per dim pair np
       ldmatrix.x4.trans at key 16 kk + l % 16, chunk 2 np + l / 16: {b0, b1} of o n-tiles 2 np,
       2 np + 1; two mma.
    3. wait_group 0; l summed over the quad; o times 1 / l (0 where l == 0) packed to f16x2 into the
       warp's Q tile (row g / g + 8, chunk nt, halves 2t, 2t + 1); __syncwarp(); 16-byte stores of
       the rows < seq_q.
    """
    raise NotImplementedError("Day 67: write the core of flash_fwd (the docstring is its spec) after the given "
                              "helpers, types and pieces (6 lines)")


FLASH_CONSTANTS = r"""
#define THREADS (WARPS * 32)
#define CHUNKS (HEAD_DIM / 8)    // 16-byte chunks in a row of q, k, v, out
#define KC (HEAD_DIM / 16)       // 16-deep k steps of Q K^T
#define DN (HEAD_DIM / 8)        // 8-wide n-tiles of O
#define SN (BLOCK_N / 8)         // 8-wide n-tiles of S
#define PK (BLOCK_N / 16)        // 16-deep k steps of P V
#define TILE_HALVES (BLOCK_N * HEAD_DIM)
static_assert(HEAD_DIM % 16 == 0 && HEAD_DIM >= 32 && HEAD_DIM <= 128, "HEAD_DIM: 32, 48, ..., 128");
static_assert(CHUNKS % 8 == 0 || CHUNKS % 4 == 0, "the swizzle permutes chunks in groups of 8 or 4");
static_assert(WARP_ROWS == 16 && BLOCK_M == WARPS * WARP_ROWS, "a warp is one m16 row tile");
static_assert(BLOCK_N % 16 == 0 && SN % 2 == 0, "K fragments come in pairs of n-tiles");
static_assert(DN % 2 == 0, "V fragments come in pairs of n-tiles");
static_assert((BLOCK_N * CHUNKS) % THREADS == 0, "every thread copies the same number of K/V chunks");
static_assert((WARP_ROWS * CHUNKS) % 32 == 0, "every lane copies the same number of Q / output chunks");
"""

FLASH_CORE = r"""
#define NEG_INF __int_as_float(0xff800000)

// Chunk c of row r of a tile is stored at chunk swz(r, c): the 8 rows one ldmatrix phase reads at the
// same logical chunk land in 8 different 16-byte bank groups.
__device__ __forceinline__ int swz(int r, int c) {
#if (CHUNKS % 8) == 0
    return c ^ (r & 7);          // rows of 128 or 256 bytes
#else
    return c ^ ((r >> 1) & 3);   // rows of 64 (dim 32) or 192 bytes (dim 96): XOR < 4 stays in the row
#endif
}
// Byte offset of (row r, chunk c) in a tile of CHUNKS chunks a row.
__device__ __forceinline__ unsigned tile_byte(int r, int c) { return (unsigned)((r * CHUNKS + swz(r, c)) * 16); }

__device__ __forceinline__ float quad_max(float x) {  // the 4 lanes holding one row: lanes 4g .. 4g + 3
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
    return x;
}
__device__ __forceinline__ float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    x += __shfl_xor_sync(0xffffffffu, x, 2);
    return x;
}

// One key tile of the base-2 online softmax on this lane's accumulators: s (raw scores, masked to
// -inf) becomes p = exp2(s scale_log2 - m); row half r2 (0: row g, elements 0, 1; 1: row g + 8,
// elements 2, 3) rescales its running sum l and output o by exp2(m_old - m_new).
__device__ __forceinline__ void online_softmax(float (&s)[SN][4], float (&o)[DN][4], float (&m)[2],
                                               float (&l)[2], float scale_log2) {
#pragma unroll
    for (int r2 = 0; r2 < 2; ++r2) {
        float mx = NEG_INF;
#pragma unroll
        for (int nt = 0; nt < SN; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * r2], s[nt][2 * r2 + 1]));
        mx = quad_max(mx);
        const float m_new = fmaxf(m[r2], mx * scale_log2);
        const float m_use = m_new == NEG_INF ? 0.0f : m_new;  // no key yet: exp2(-inf - 0) = 0, never NaN
        const float alpha = fast_exp2(m[r2] - m_use);
        m[r2] = m_new;
        float sum = 0.0f;
#pragma unroll
        for (int nt = 0; nt < SN; ++nt) {
#pragma unroll
            for (int e = 2 * r2; e < 2 * r2 + 2; ++e) {
                const float p = fast_exp2(fmaf(s[nt][e], scale_log2, -m_use));
                s[nt][e] = p;
                sum += p;
            }
        }
        l[r2] = l[r2] * alpha + sum;  // this lane's 16 columns; summed over the quad at the end
#pragma unroll
        for (int dn = 0; dn < DN; ++dn) {
            o[dn][2 * r2] *= alpha;      // the running output rescaled to the new max
            o[dn][2 * r2 + 1] *= alpha;
        }
    }
}

extern "C" __global__ void __launch_bounds__(THREADS, 2)
flash_fwd(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
          const unsigned short* __restrict__ v, unsigned short* __restrict__ o,
          const int* __restrict__ cu_seqlens_q, const int* __restrict__ cu_seqlens_k,
          int batch, int heads, int kv_heads, int seq_q, int seq_k,
          long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh, long long k_sr,
          long long v_sb, long long v_sh, long long v_sr, long long o_sb, long long o_sh, long long o_sr,
          float scale_log2) {
    extern __shared__ __align__(128) unsigned char smem[];
    const FlashParams p{q, k, v, o, cu_seqlens_q, cu_seqlens_k, batch, heads, kv_heads, heads / kv_heads,
                        seq_q, seq_k, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, v_sb, v_sh, v_sr, o_sb, o_sh, o_sr,
                        scale_log2};
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t4 = lane & 3;  // the accumulator layout: rows g, g + 8; columns 2 t4, +1

    const BlockInfo blk = block_info(p);                // piece (a)
    const SeqInfo si = seq_info(p, blk.batch);          // piece (d)
    if (blk.row0 >= si.seq_q) return;                   // the whole block: before any barrier
    const WarpInfo wi = warp_info(p, blk, warp);        // piece (c)
    const int row_hi = min(blk.row0 + BLOCK_ROWS, si.seq_q) - 1;
    const KeyTiles kt = key_tiles(p, si, blk.row0, row_hi);  // piece (b)
    const int kv_head = blk.head / p.group;             // GQA

    // Shared memory: [WARPS x 16 Q rows][2 x K tile][2 x V tile], every row CHUNKS swizzled chunks.
    const unsigned sq = smem_u32(smem) + warp * (WARP_ROWS * HEAD_DIM * 2);  // this warp's Q rows, later its O rows
    const unsigned sk = smem_u32(smem) + WARPS * WARP_ROWS * HEAD_DIM * 2;
    const unsigned sv = sk + 2 * TILE_HALVES * 2;
    unsigned char* const sq_ptr = smem + warp * (WARP_ROWS * HEAD_DIM * 2);

    const unsigned short* qg = p.q + blk.batch * p.q_sb + wi.head * p.q_sh + (long long)si.q_row0 * p.q_sr;
    const unsigned short* kg = p.k + blk.batch * p.k_sb + kv_head * p.k_sh + (long long)si.k_row0 * p.k_sr;
    const unsigned short* vg = p.v + blk.batch * p.v_sb + kv_head * p.v_sh + (long long)si.k_row0 * p.v_sr;
    unsigned short* og = p.o + blk.batch * p.o_sb + wi.head * p.o_sh + (long long)si.q_row0 * p.o_sr;

    // K and V rows n0 .. n0 + 63 of tile `tile` into `stage`; chunks of keys >= seq_k zero-filled.
    auto load_kv = [&](int tile, int stage) {
        const int n0 = tile * BLOCK_N;
#pragma unroll
        for (int it = 0; it < BLOCK_N * CHUNKS / THREADS; ++it) {
            const int i = tid + it * THREADS, r = i / CHUNKS, c = i % CHUNKS;  // a warp: consecutive chunks
            const bool ok = n0 + r < si.seq_k;
            const unsigned off = stage * TILE_HALVES * 2 + tile_byte(r, c);
            cp_async16(sk + off, ok ? kg + (long long)(n0 + r) * p.k_sr + c * 8 : p.k, ok ? 16 : 0);
            cp_async16(sv + off, ok ? vg + (long long)(n0 + r) * p.v_sr + c * 8 : p.v, ok ? 16 : 0);
        }
    };

    // 1. This warp's 16 Q rows (zeros past seq_q) and the first K/V tile, one group.
#pragma unroll
    for (int it = 0; it < WARP_ROWS * CHUNKS / 32; ++it) {
        const int i = lane + it * 32, r = i / CHUNKS, c = i % CHUNKS;
        const int row = wi.row0 + r;
        const bool ok = row < si.seq_q;
        cp_async16(sq + tile_byte(r, c), ok ? qg + (long long)row * p.q_sr + c * 8 : p.q, ok ? 16 : 0);
    }
    if (kt.begin < kt.end) load_kv(kt.begin, 0);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();

    unsigned qf[KC][4];  // the A fragments of the warp's 16 x HEAD_DIM Q: registers for the whole loop
#pragma unroll
    for (int kc = 0; kc < KC; ++kc) ldmatrix_x4(qf[kc], sq + tile_byte(lane & 15, 2 * kc + (lane >> 4)));

    float acc[DN][4];
#pragma unroll
    for (int dn = 0; dn < DN; ++dn)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[dn][e] = 0.0f;
    float row_max[2] = {NEG_INF, NEG_INF};  // base 2: scores times scale_log2
    float row_sum[2] = {0.0f, 0.0f};        // this lane's columns only
    const int rows[2] = {wi.row0 + g, wi.row0 + g + 8};

    // 2. The key tiles: one barrier a tile; tile j + 1's copies fly while tile j is computed.
    for (int j = kt.begin; j < kt.end; ++j) {
        const int stage = (j - kt.begin) & 1;
        if (j != kt.begin) {
            cp_async_wait<0>();  // this thread's copies of tile j landed
            __syncthreads();     // everyone's did; and everyone finished tile j - 1 (the other stage)
        }
        if (j + 1 < kt.end) load_kv(j + 1, stage ^ 1);
        cp_async_commit();
        const unsigned kb = sk + stage * TILE_HALVES * 2, vb = sv + stage * TILE_HALVES * 2;

        // S = Q K^T (16 x 64 for this warp, raw scores, fp32).
        float s[SN][4];
#pragma unroll
        for (int nt = 0; nt < SN; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[nt][e] = 0.0f;
#pragma unroll
        for (int kc = 0; kc < KC; ++kc) {
#pragma unroll
            for (int np = 0; np < SN / 2; ++np) {
                unsigned b[4];  // {b0, b1} of n-tile 2 np, then of 2 np + 1
                ldmatrix_x4(b, kb + tile_byte(16 * np + (lane & 7) + ((lane >> 4) << 3), 2 * kc + ((lane >> 3) & 1)));
                mma16816(s[2 * np], qf[kc], b[0], b[1]);
                mma16816(s[2 * np + 1], qf[kc], b[2], b[3]);
            }
        }

        if (tile_needs_mask(p, si, blk.row0, row_hi, j)) {  // piece (b)
#pragma unroll
            for (int nt = 0; nt < SN; ++nt) {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int key = j * BLOCK_N + 8 * nt + 2 * t4 + (e & 1);
                    const bool dead = key >= si.seq_k || (CAUSAL && key > rows[e >> 1] + si.seq_k - si.seq_q);
                    if (dead) s[nt][e] = NEG_INF;
                }
            }
        }

        online_softmax(s, acc, row_max, row_sum, p.scale_log2);

        // O += P V: P's accumulators, rounded to f16 pairs, are the A fragments of the 16-key steps.
#pragma unroll
        for (int kk = 0; kk < PK; ++kk) {
            const unsigned a[4] = {pack_half2(s[2 * kk][0], s[2 * kk][1]), pack_half2(s[2 * kk][2], s[2 * kk][3]),
                                   pack_half2(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                   pack_half2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
            for (int np = 0; np < DN / 2; ++np) {
                unsigned b[4];  // V is (key, dim) row-major: .trans gives B's two consecutive keys of one dim
                ldmatrix_x4_trans(b, vb + tile_byte(16 * kk + (lane & 15), 2 * np + (lane >> 4)));
                mma16816(acc[2 * np], a, b[0], b[1]);
                mma16816(acc[2 * np + 1], a, b[2], b[3]);
            }
        }
    }
    cp_async_wait<0>();  // the last group is empty; leave nothing in flight

    // 3. O / l as float16 through this warp's Q rows (only this warp ever read them), then 16-byte stores.
    const float l0 = quad_sum(row_sum[0]), l1 = quad_sum(row_sum[1]);
    const float inv0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, inv1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;  // no key: zeros
    __syncwarp();
#pragma unroll
    for (int dn = 0; dn < DN; ++dn) {
        *reinterpret_cast<unsigned*>(sq_ptr + tile_byte(g, dn) + 4 * t4) =
            pack_half2(acc[dn][0] * inv0, acc[dn][1] * inv0);
        *reinterpret_cast<unsigned*>(sq_ptr + tile_byte(g + 8, dn) + 4 * t4) =
            pack_half2(acc[dn][2] * inv1, acc[dn][3] * inv1);
    }
    __syncwarp();
#pragma unroll
    for (int it = 0; it < WARP_ROWS * CHUNKS / 32; ++it) {
        const int i = lane + it * 32, r = i / CHUNKS, c = i % CHUNKS;
        const int row = wi.row0 + r;
        if (row < si.seq_q)
            *reinterpret_cast<uint4*>(og + (long long)row * p.o_sr + c * 8) =
                *reinterpret_cast<const uint4*>(sq_ptr + tile_byte(r, c));
    }
}
"""


def flash_smem_bytes(dim: int) -> int:
    """Dynamic shared memory of flash_fwd: 4 x 16 Q rows + 2 K + 2 V tiles of 64 rows, float16."""
    return (WARPS * WARP_ROWS + 4 * BLOCK_N) * dim * 2


@functools.cache
def flash_kernel(source: str, smem: int):
    """flash_fwd compiled once per source (one configuration), opted in to its dynamic shared memory."""
    import cupy  # lazily: CuPy cannot import without a GPU

    kernel = cupy.RawKernel(source, "flash_fwd", options=("-std=c++17",))
    kernel.max_dynamic_shared_size_bytes = smem  # above 48 KB needs the opt-in (80 KB at dim 128)
    return kernel


def _strides(name, a):
    """(batch, head, row) strides of a 4-D CuPy array in elements, checked for cp.async."""
    st = tuple(s // a.itemsize for s in a.strides)
    if a.strides[3] != a.itemsize or any(s % CHUNK for s in st[:3]) or a.data.ptr % 16:
        raise ValueError(f"{name}: expected contiguous rows, strides multiples of {CHUNK} elements and a "
                         f"16-byte aligned base (cp.async copies 16 bytes), got strides {st}")
    return st[:3]


def launch_flash(q, k, v, out, causal, *, seq_q, seq_k, batch, heads, kv_heads, strides,
                 cu_seqlens_q=None, cu_seqlens_k=None, pieces: FlashPieces = PIECES) -> None:
    """Launch flash_fwd on CuPy arrays (float16): strides = ((q_sb, q_sh, q_sr), (k_...), (v_...),
    (o_...)) in elements; cu_seqlens_* int32 device arrays or None (a dummy is passed). The entry
    point days 68-70 call with their pieces (and day 70 with packed strides and cu_seqlens)."""
    import cupy

    dim = q.shape[-1]
    smem = flash_smem_bytes(dim)
    kernel = flash_kernel(flash_source(dim, bool(causal), pieces), smem)
    dummy = cupy.zeros(1, dtype=cupy.int32)
    cu_q = dummy if cu_seqlens_q is None else cu_seqlens_q
    cu_k = dummy if cu_seqlens_k is None else cu_seqlens_k
    flat = [np.int64(s) for st in strides for s in st]
    grid = tuple(int(x) for x in pieces.grid(batch, heads, kv_heads, seq_q))
    kernel(grid, (THREADS,), (q, k, v, out, cu_q, cu_k, np.int32(batch), np.int32(heads), np.int32(kv_heads),
                              np.int32(seq_q), np.int32(seq_k), *flat, np.float32(LOG2E / math.sqrt(dim))),
           shared_mem=smem)


def tensor_cores(q, k, v, causal):
    check_inputs(q, k, v, causal)
    if not ON_GPU:
        raise RuntimeError("tensor_cores needs a CUDA GPU: the simulator cannot run mma.sync "
                           "(tests/test_day67_flash_attention_tensor_cores.py compiles flash_source with nvcc)")
    import cupy

    b, h, sq, d = q.shape
    kvh, sk = k.shape[1], k.shape[2]
    d_q, d_k, d_v = (cupy.asarray(a) for a in (q, k, v))
    out = launch.empty(q.shape, np.float16)
    d_o = cupy.asarray(out)
    strides = tuple(_strides(name, a) for name, a in (("q", d_q), ("k", d_k), ("v", d_v), ("out", d_o)))
    launch_flash(d_q, d_k, d_v, d_o, causal, seq_q=sq, seq_k=sk, batch=b, heads=h, kv_heads=kvh,
                 strides=strides)
    return launch.result(out, q, k, v)


# The unit's fixed interface.
naive = fragments
optimized = tensor_cores


def library(q, k, v, causal):
    """torch SDPA's flash backend on the float16 inputs (GQA by enable_gqa, bottom-right causal)."""
    return attention_common.torch_sdpa(q, k, v, causal, "flash")
