"""Day 70: attention VI -- variable-length batches: packed sequences with cu_seqlens, no padding computed.

A batch of sequences of mixed lengths, as a serving engine sees a prefill batch. The sequences are
PACKED one after another along the token axis (FlashAttention-2's varlen layout):

    q (total_q, heads, dim), k and v (total_k, kv_heads, dim), float16;
    cu_seqlens_q, cu_seqlens_k int32 (batch + 1,): sequence b holds query rows cu_seqlens_q[b] ..
    cu_seqlens_q[b + 1] - 1 and key rows cu_seqlens_k[b] .. cu_seqlens_k[b + 1] - 1 (cumulative
    lengths starting at 0; a sequence may have more keys than queries: queries appended to a context).

The buffers may hold rows past the last sequence (an allocator's spare capacity; make_inputs fills
PAD_ROWS of them with NaN): they belong to no sequence and must never reach an output. Per sequence
the problem is attention_common's (GQA: query head h reads kv head h // (heads / kv_heads); causal
bottom-right with the SEQUENCE's lengths: query i sees keys j <= i + len_k - len_q; rows that see no
key are zeros; scale 1 / sqrt(dim)). The output is (cu_seqlens_q[-1], heads, dim) float16: one row per
query token of the sequences, every row written; the buffer's extra rows have no output row.

v1 padded          what a user with a dense kernel does: pad every sequence to the longest with a
                   coalesced Numba repack kernel (8-byte words; queries left-aligned to the END of
                   their padded rows so bottom-right causal lines up, keys at the start) into
                   (batch, heads, max_len, dim) buffers, run day 67's tensor-core template with a
                   key length per sequence (piece (d) PADDED_SEQ_INFO) over EVERY padded query row and
                   every padded key tile (piece (b) PADDED_KEY_TILES; tiles past a sequence's keys are
                   masked whole), then gather the real rows back. GPU only (mma.sync).
v2 varlen_fragments day 67's Numba fragments kernel derived (course.days.derive_kernel) to read the
                   sequence's offsets and lengths from cu_seqlens through a device function
                   (varlen_seq_info, the Numba piece (d)) and to index the packed arrays; the grid is
                   sized for the longest sequence and a block past its sequence's end returns at once.
                   The simulator grades it.
v3 packed          day 67's template with piece (d) packed_seq_info_source() reading cu_seqlens, day
                   68's KEY_TILES_CAUSAL as piece (b) (a causal block stops at its diagonal), and
                   the packed strides: head stride dim, row stride heads x dim, batch stride 0 (the
                   sequence's offset comes in through SeqInfo's q_row0 / k_row0). Grid (ceil(max_len_q
                   / 64), heads, batch); the blocks past a sequence's end return before any barrier.
                   Nothing of the padding is computed, copied or allocated.
optimized_varlen = packed (the issue's interface). optimized(q, k, v, causal) takes the unit's dense
(batch, heads, seq, dim) batch as `batch` uniform sequences: on a GPU the packed kernel with strides
that need no copy (row stride dim, head stride seq x dim, and batch stride (heads - 1) seq dim, which
with the packed offset b seq x row stride dim lands on b heads seq dim), in the simulator a transpose
to the packed layout and varlen_fragments.

Napkin math (the bench: 16 sequences, lengths 16 .. 4096 spread geometrically (MIXED_LENGTHS), 32
heads, 8 kv heads, dim 128). Tokens 13,220 (sum) against 16 x 4096 = 65,536 padded: 4.96x the tokens.
Pairs (what attention costs): sum len^2 = 32.1 M against 16 x 4096^2 = 268 M: 8.36x. The scored pairs
of the real sequences (FLOPs = 4 x 32 heads x 128 x pairs) are 0.526 TFLOP non-causal, 0.263 causal:
the bench's FLOPs, for every version. The packed kernel computes exactly the sequences' tiles (causal:
only those up to each block's diagonal, day 68's piece (b) composed with this piece (d)), at day 67's
rate or below (short sequences); its grid is 64 x 32 x 16 = 32,768 blocks,
of which 6,880 work and the rest return at once (a few cycles each). The padded version computes 4.4
TFLOP for either (every padded query row against every padded key tile): ~8.4x the packed work, so
its share of peak should fall by about that ratio, plus the repack: q 108 MB read, 268 MB written; k
and v 27 MB read, 67 MB written each; out 268 MB read, 108 MB written: ~0.94 GB, ~0.22 ms at 4.2
TB/s, small beside the padded attention's milliseconds. Expect packed ~8x faster than padded, non-
causal, and more causal (packed skips the tiles past the diagonal, padded visits them all). Memory:
268 MB each for the padded q and out, 67 MB each for k and v, on top of the packed 108 + 27 + 27 + 108
MB.
Measured on the H200 (make bench, cuBLAS FP16 GEMM 770 TFLOP/s in the same run; TFLOP/s on the real
pairs):
  non-causal  packed 2,204.4 us, 238.6 TFLOP/s, 31.0 % of peak, 7.95x faster than padded (17,531.7 us,
              30.0 TFLOP/s counted, ~251 computed); per-sequence SDPA 2,458.0 us, 214.0 TFLOP/s: packed
              1.12x faster. varlen_fragments 343.3 ms (0.05x padded).
  causal      packed 1,550.9 us, 169.7 TFLOP/s, 22.0 %, 12.3x faster than padded (19,107.7 us); SDPA
              2,194.7 us, 119.9 TFLOP/s: packed 1.42x faster. Before day 68's piece (b) was composed in,
              packed computed the masked tiles above each sequence's diagonal and took 2,325.5 us (SDPA
              1.33x faster in that run). varlen_fragments 252.2 ms.
  Target (faster packed than padded, in proportion to the padding): met, 7.95x non-causal against the
  8.4x of the pairs, 12.3x causal. packed's non-causal rate is 82 % of day 67's tensor_cores at its
  dense shape (290.7 TFLOP/s): the short sequences' blocks and the tail of the longest (load balance)
  the likely reasons, not measured apart.

Edges: the packed kernel reads a sequence's keys only below its own len_k (cp.async zero-fills the
chunks of rows past it: 0 x NaN would poison P V, zeros add nothing), so neither the next sequence's
rows nor the NaN tail enter; it stores only rows below len_q. cu_seqlens are read on the host too
(batch + 1 ints copied back) for the checks and the grid's max length: FlashAttention takes
max_seqlen as an argument instead; the fixed interface here does not.

library: flash_attn_varlen_func if flash_attn is installed, else torch SDPA's flash backend once per
sequence (torch has no varlen entry): a loop of `batch` launches, each of one sequence's blocks.
"""

import dataclasses
import functools
import math

import numpy as np

from course import ON_GPU, cuda, days, launch
from numba import int32, uint64  # numba names only after the course import
from solutions import attention_common
from solutions import day67_flash_attention_tensor_cores as day67
from solutions import day68_causal_attention as day68

TITLE = "Attention VI: variable-length batches"
MEMORY_SPACE = "shared + register"
VERSIONS = ("padded", "varlen_fragments", "packed")
SIM_VERSIONS = ("varlen_fragments",)  # padded and packed run day 67's CUDA C (mma.sync)
BOUND = "compute"
PEAK_DTYPE = "float16"
RTOL = attention_common.RTOL["float16"]
ERROR_FLOOR = attention_common.ERROR_FLOOR["float16"]
HEAD_DIMS = attention_common.HEAD_DIMS
BLOCK_M = day67.BLOCK_M
BLOCK_N = day67.BLOCK_N
THREADS = day67.THREADS
LOG2E = day67.LOG2E
PAD_ROWS = 16  # NaN rows past the last sequence in every packed buffer make_inputs builds

# A size: (lengths_q, lengths_k, heads, kv_heads, dim, causal[, kind]), the lengths tuples of the
# batch's sequences (len_q <= len_k: queries appended to a context; len_q > len_k: rows that see no key).
TEST_SIZES = (
    ((1,), (1,), 1, 1, 32, False),  # one sequence of one token
    ((1, 64, 9), (1, 64, 9), 1, 1, 32, True),  # length 1, exactly a tile, a partial tile (the NaN tail past it)
    ((5, 1, 20), (70, 9, 20), 1, 1, 32, True),  # queries after a context, per sequence (bottom-right each)
    ((30, 3), (9, 3), 2, 1, 32, True),  # more queries than keys: the first 21 rows of sequence 0 see none; GQA 2 / 1
    ((9, 5), (40, 5), 2, 1, 32, False, "large"),  # scores ~1e4
    ((6,), (20,), 1, 1, 128, True),  # dim 128
)
# The unit's dense interface: optimized(q, k, v, causal) on attention_common's (batch, heads, seq, dim) sizes.
DENSE_TEST_SIZES = (
    (1, 1, 1, 1, 1, 32, False),
    (2, 2, 1, 5, 9, 32, True),  # fewer queries than keys, GQA, two batches read in place
    (2, 1, 1, 12, 4, 64, True),  # more queries than keys: rows that see no key
)


def mixed_lengths(batch: int = 16, shortest: int = 16, longest: int = 4096, seed: int = 70) -> tuple:
    """batch lengths spread geometrically from shortest to longest (both included), in an order fixed by
    the seed (the batch arrives unsorted)."""
    lengths = np.round(np.geomspace(shortest, longest, batch)).astype(int)
    return tuple(int(x) for x in np.random.default_rng(seed).permutation(lengths))


MIXED_LENGTHS = mixed_lengths()
BENCH_SIZES = (
    (MIXED_LENGTHS, MIXED_LENGTHS, 32, 8, 128, False),
    (MIXED_LENGTHS, MIXED_LENGTHS, 32, 8, 128, True),
)


def geometry(n):
    """(lengths_q, lengths_k, heads, kv_heads, dim, causal, kind) of a size tuple."""
    if not isinstance(n, (tuple, list)) or len(n) not in (6, 7):
        raise ValueError(f"size: expected (lengths_q, lengths_k, heads, kv_heads, dim, causal[, kind]), got {n!r}")
    lq, lk = tuple(int(x) for x in n[0]), tuple(int(x) for x in n[1])
    if len(lq) != len(lk) or not lq:
        raise ValueError(f"size: expected as many query lengths as key lengths, got {lq} and {lk}")
    kind = n[6] if len(n) == 7 else "normal"
    return lq, lk, int(n[2]), int(n[3]), int(n[4]), bool(n[5]), kind


def padding_fraction(n) -> dict:
    """How much of a padded batch is padding: tokens (batch x max / sum) and pairs (batch x max_q x
    max_k / sum len_q len_k: what a padded attention computes over what the sequences need)."""
    lq, lk = geometry(n)[:2]
    return {"tokens": len(lq) * max(lq) / sum(lq),
            "pairs": len(lq) * max(lq) * max(lk) / sum(a * b for a, b in zip(lq, lk))}


def make_inputs(n, seed: int = 0):
    """(q, k, v, cu_seqlens_q, cu_seqlens_k, causal): packed float16 buffers with PAD_ROWS NaN rows
    after the last sequence, the values drawn as attention_common draws them (kind "large": scores
    ~1e4)."""
    lq, lk, h, kvh, d, causal, kind = geometry(n)
    tq, tk = sum(lq), sum(lk)
    q, k, v, _ = attention_common.make_inputs((1, h, kvh, tq, tk, d, causal, kind), seed, np.float16)
    def packed(a, rows):  # (1, heads, rows, dim) -> (rows + PAD_ROWS, heads, dim), the tail NaN
        out = np.full((rows + PAD_ROWS, a.shape[1], d), np.nan, dtype=np.float16)
        out[:rows] = a[0].transpose(1, 0, 2)
        return out
    cu_q = np.concatenate([[0], np.cumsum(lq)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lk)]).astype(np.int32)
    return packed(q, tq), packed(k, tk), packed(v, tk), cu_q, cu_k, causal


def reference(q, k, v, cu_seqlens_q, cu_seqlens_k, causal):
    """attention_common.reference on each sequence's slice (float64 inside, float16 out), packed
    into (cu_seqlens_q[-1], heads, dim); rows that see no key (and sequences with no key) are zeros."""
    cu_q, cu_k = np.asarray(cu_seqlens_q), np.asarray(cu_seqlens_k)
    out = np.zeros((int(cu_q[-1]),) + q.shape[1:], dtype=q.dtype)
    for b in range(len(cu_q) - 1):
        q0, q1, k0, k1 = int(cu_q[b]), int(cu_q[b + 1]), int(cu_k[b]), int(cu_k[b + 1])
        if q1 > q0 and k1 > k0:
            seq = (a[None].transpose(0, 2, 1, 3) for a in (q[q0:q1], k[k0:k1], v[k0:k1]))
            out[q0:q1] = attention_common.reference(*seq, causal)[0].transpose(1, 0, 2)
    return out


def traffic(q, k, v, cu_seqlens_q, cu_seqlens_k, causal):
    """(minimum bytes, FLOPs) of the real sequences only: their q, k, v rows read once, the output
    written once; 4 dim FLOPs a scored (query, key) pair and head (causal: the triangle's share)."""
    cu_q, cu_k = _host_ints(cu_seqlens_q), _host_ints(cu_seqlens_k)
    h, d = q.shape[1], q.shape[2]
    row_q, row_k = h * d * 2, k.shape[1] * d * 2
    nbytes = 2 * int(cu_q[-1]) * row_q + 2 * int(cu_k[-1]) * row_k
    pairs = sum(attention_common.pairs(int(cu_q[b + 1] - cu_q[b]), int(cu_k[b + 1] - cu_k[b]), bool(causal))
                for b in range(len(cu_q) - 1))
    return nbytes, 4 * h * d * pairs


# ---- the inputs ------------------------------------------------------------------------------------------

def _host_ints(a) -> np.ndarray:
    """cu_seqlens on the host (batch + 1 ints copied back from a device array)."""
    if isinstance(a, np.ndarray):
        return a
    if hasattr(a, "copy_to_host"):
        return a.copy_to_host()
    import cupy

    return cupy.asnumpy(a)


def check_varlen_inputs(q, k, v, cu_seqlens_q, cu_seqlens_k, causal):
    """ValueError naming the argument unless q (total_q, heads, dim), k and v (total_k, kv_heads, dim)
    are C-contiguous float16, heads a multiple of kv_heads, dim in HEAD_DIMS, cu_seqlens_q and
    cu_seqlens_k int32 vectors of the same length batch + 1 >= 2 that start at 0, never decrease and
    end inside their buffers, and causal a bool. Returns the host copies of the two cu_seqlens."""
    for name, a in (("q", q), ("k", k), ("v", v)):
        launch.check_array(name, a, dtype=np.float16, ndim=3)
    for name, a in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        launch.check_array(name, a, dtype=np.int32, ndim=1)
    if k.shape != v.shape:
        raise ValueError(f"k, v: expected the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    h, d = q.shape[1], q.shape[2]
    kvh = k.shape[1]
    if k.shape[2] != d:
        raise ValueError(f"k: expected (total_k, kv_heads, {d}) to match q {tuple(q.shape)}, got {tuple(k.shape)}")
    if min(h, kvh) < 1 or h % kvh:
        raise ValueError(f"heads: expected a multiple of kv_heads ({kvh}), got {h}")
    if d not in HEAD_DIMS:
        raise ValueError(f"dim: expected one of {HEAD_DIMS}, got {d}")
    if not isinstance(causal, (bool, np.bool_)):
        raise ValueError(f"causal: expected a bool, got {type(causal).__name__}")
    cu_q, cu_k = _host_ints(cu_seqlens_q), _host_ints(cu_seqlens_k)
    if len(cu_q) != len(cu_k) or len(cu_q) < 2:
        raise ValueError(f"cu_seqlens_q, cu_seqlens_k: expected the same length batch + 1 >= 2, got "
                         f"{len(cu_q)} and {len(cu_k)}")
    for name, cu, rows in (("cu_seqlens_q", cu_q, q.shape[0]), ("cu_seqlens_k", cu_k, k.shape[0])):
        if cu[0] != 0:
            raise ValueError(f"{name}: expected cumulative lengths starting at 0, got {cu[0]} first")
        if np.any(np.diff(cu) < 0):
            raise ValueError(f"{name}: expected non-decreasing cumulative lengths, got {cu.tolist()}")
        if cu[-1] > rows:
            raise ValueError(f"{name}: expected a last entry <= the buffer's {rows} rows, got {cu[-1]}")
    return cu_q, cu_k


# ---- v2: day 67's fragments kernel on packed sequences (Numba, simulator-graded) -------------------------

@cuda.jit(device=True)
def varlen_seq_info(cu_seqlens_q, cu_seqlens_k, b):
    """Piece (d) in Numba: (q_row0, k_row0, seq_q, seq_k) of sequence b: the first query row and the
    first key row of the sequence in the packed buffers, and its two lengths, from the cumulative
    lengths (sequence b is rows cu[b] .. cu[b + 1] - 1)."""
    # EXERCISE: the sequence's first query and key rows and its two lengths, from cu_seqlens_q and cu_seqlens_k
    q_row0 = cu_seqlens_q[b]
    k_row0 = cu_seqlens_k[b]
    seq_q = cu_seqlens_q[b + 1] - q_row0
    seq_k = cu_seqlens_k[b + 1] - k_row0
    return q_row0, k_row0, seq_q, seq_k


# The checked edits of day 67's flash_fragments_kernel (each old text occurs once in its dedented
# source): its lengths and offsets come from varlen_seq_info, its arrays are packed (row, head, dim),
# a block past its sequence returns before any barrier. The K/V loads and the mask are day 67's,
# restated where the day depends on them.
VARLEN_EDITS = [
    ("def flash_fragments_kernel(q, k, v, out, scale_log2, causal):",
     "def flash_varlen_kernel(q, k, v, out, cu_seqlens_q, cu_seqlens_k, scale_log2, causal):"),
    ("    seq_q = q.shape[2]\n    seq_k = k.shape[2]\n",
     "    q_row0, k_row0, seq_q, seq_k = varlen_seq_info(cu_seqlens_q, cu_seqlens_k, cuda.blockIdx.z)\n"),
    ("    row0 = mb * BLOCK_M\n",
     "    row0 = mb * BLOCK_M\n"
     "    if row0 >= seq_q:  # the grid is sized for the longest sequence: this one ends before the block\n"
     "        return\n"),
    ("    shift = seq_k - seq_q",
     "    shift = seq_k - seq_q  # per sequence: its own lengths, not the packed totals"),
    ("q_s[r, d] = q[b, h, row0 + r, d]", "q_s[r, d] = q[q_row0 + row0 + r, h, d]"),
    ("            if n0 + r < seq_k:\n",
     "            if n0 + r < seq_k:  # the sequence's own keys: past them the next one's, or NaN\n"),
    ("k_s[r, d] = k[b, kvh, n0 + r, d]", "k_s[r, d] = k[k_row0 + n0 + r, kvh, d]"),
    ("v_s[r, d] = v[b, kvh, n0 + r, d]", "v_s[r, d] = v[k_row0 + n0 + r, kvh, d]"),
    ("out[b, h, i, 8 * dn + 2 * t + e % 2]", "out[q_row0 + i, h, 8 * dn + 2 * t + e % 2]"),
]  # the packed indexing: nothing else of day 67's kernel changes


@functools.cache
def varlen_kernel(head_dim: int):
    """day 67's fragments kernel for one head dim with VARLEN_EDITS. Launch: grid (ceil(max len_q / 64),
    heads, batch), 128 threads; arguments (q, k, v, out, cu_seqlens_q, cu_seqlens_k, scale_log2, causal)."""
    return days.derive_kernel(day67.fragments_kernel(head_dim), VARLEN_EDITS, varlen_seq_info=varlen_seq_info,
                              D=head_dim, SN=BLOCK_N // 8, DN=head_dim // 8)


_A3 = "float16[:, :, ::1]"
_VARLEN_SIG = f"void({_A3}, {_A3}, {_A3}, {_A3}, int32[::1], int32[::1], float32, boolean)"


def varlen_fragments(q, k, v, cu_seqlens_q, cu_seqlens_k, causal):
    cu_q, cu_k = check_varlen_inputs(q, k, v, cu_seqlens_q, cu_seqlens_k, causal)
    h, d = q.shape[1], q.shape[2]
    batch = len(cu_q) - 1
    max_q = int(np.max(np.diff(cu_q)))
    d_q, d_k, d_v, d_cq, d_ck = launch.to_device(q, k, v, cu_seqlens_q, cu_seqlens_k)
    out = launch.empty((int(cu_q[-1]), h, d), np.float16)
    if max_q > 0:
        scale_log2 = np.float32(LOG2E / math.sqrt(d))
        varlen_kernel(d)[(launch.blocks(max_q, BLOCK_M), h, batch), THREADS](
            d_q, d_k, d_v, out, d_cq, d_ck, scale_log2, bool(causal))
    return launch.result(out, q, k, v)


# ---- v1: pad to the longest (repack in Numba, day 67's template over the padded batch) -------------------

@cuda.jit
def repack_kernel(packed, padded, cu_seqlens, max_len, heads, left, to_padded):
    """Copy between a packed buffer seen as 8-byte words, (rows x heads, dim / 4), and a padded one,
    (batch x heads x max_len, dim / 4): padded row (b, h, r) is packed row (cu[b] + r - off) x heads + h
    with off = max_len - len_b if left (the sequence ends at the last padded row) else 0. to_padded:
    every padded word written (zeros outside the sequence); else only the sequence's rows go back.
    Grid-stride over the padded words: consecutive threads, consecutive words of one row (a row of
    dim 128 is 32 words: one warp, 256 contiguous bytes read and written)."""
    # EXERCISE: grid-stride over padded's words; find (b, h, r) and the packed row; copy (zeros outside the sequence)
    words = padded.shape[1]
    n = padded.shape[0] * words
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for idx in range(start, n, stride):
        w = idx % words
        prow = idx // words
        r = prow % max_len
        bh = prow // max_len
        h = bh % heads
        b = bh // heads
        length = cu_seqlens[b + 1] - cu_seqlens[b]
        src = r - (max_len - length if left else 0)
        real = src >= 0 and src < length
        row = (cu_seqlens[b] + src) * heads + h
        if to_padded:
            if real:
                padded[prow, w] = packed[row, w]
            else:  # never a load outside the sequence: the buffer's tail may hold NaN
                padded[prow, w] = uint64(0)
        elif real:
            packed[row, w] = padded[prow, w]


KERNELS = {
    "varlen_fragments": (varlen_kernel(64), _VARLEN_SIG),
    "padded.repack": (repack_kernel,
                      "void(uint64[:, ::1], uint64[:, ::1], int32[::1], int32, int32, boolean, boolean)"),
}


def _repack(packed, padded, cu, max_len, heads, left, to_padded):
    rows_p, rows_d = packed.shape[0] * packed.shape[1], padded.shape[0] * padded.shape[1] * padded.shape[2]
    pw, dw = launch.as_words(packed, rows_p), launch.as_words(padded, rows_d)
    blocks = launch.grid_stride_blocks(dw.size, 256)
    repack_kernel[blocks, 256](pw, dw, cu, int32(max_len), int32(heads), bool(left), bool(to_padded))


def pad(a, cu_seqlens, max_len: int, left: bool):
    """A packed (rows, heads, dim) device array as a zero-padded (batch, heads, max_len, dim) one
    (repack_kernel); runs in the simulator too."""
    (d_a, d_cu) = launch.to_device(a, cu_seqlens)
    batch = d_cu.shape[0] - 1
    out = launch.empty((batch, a.shape[1], max(max_len, 1), a.shape[2]), np.float16)
    _repack(d_a, out, d_cu, max(max_len, 1), a.shape[1], left, True)
    return launch.result(out, a)


def unpad(padded, cu_seqlens, rows: int, left: bool):
    """The sequences' rows of a padded (batch, heads, max_len, dim) array, packed into (rows, heads, dim)."""
    (d_p, d_cu) = launch.to_device(padded, cu_seqlens)
    out = launch.empty((rows, padded.shape[1], padded.shape[3]), np.float16)
    if rows:
        _repack(out, d_p, d_cu, padded.shape[2], padded.shape[1], left, False)
    return launch.result(out, padded)


# Piece (d) for the padded batch: every sequence at row 0 of its batch slice, max_len_q query rows (all
# computed: the queries were padded on the left, so row i of max_q sees keys j <= i + len_k - max_q,
# exactly the sequence's bottom-right window), and only its own len_k keys unmasked.
PADDED_SEQ_INFO = r"""
__device__ __forceinline__ SeqInfo seq_info(const FlashParams& p, int batch) {
    return SeqInfo{0, 0, p.seq_q, p.cu_seqlens_k[batch + 1] - p.cu_seqlens_k[batch]};
}
"""
# Piece (b) for the padded batch: every padded key tile (p.seq_k is max_len_k), masked whole past len_k.
_DEFAULT_TILES = "    return KeyTiles{0, (s.seq_k + BLOCK_N - 1) / BLOCK_N};\n"
if day67.KEY_TILES.count(_DEFAULT_TILES) != 1:
    raise ValueError("day 67's KEY_TILES no longer holds its default tile range: PADDED_KEY_TILES needs a new edit")
PADDED_KEY_TILES = day67.KEY_TILES.replace(
    _DEFAULT_TILES, "    return KeyTiles{0, (p.seq_k + BLOCK_N - 1) / BLOCK_N};  // every padded tile: the waste\n")
PADDED_PIECES = dataclasses.replace(day67.PIECES, seq_info=PADDED_SEQ_INFO, key_tiles=PADDED_KEY_TILES)


def _need_gpu(version: str) -> None:
    if not ON_GPU:
        raise RuntimeError(f"{version} needs a CUDA GPU: it runs day 67's tensor-core CUDA C (mma.sync); "
                           "tests/test_day70_varlen_attention.py compiles its source with nvcc instead")


def _dense_strides(a):
    """(batch, head, row) strides in elements of a C-contiguous 4-D array."""
    _, h, s, d = a.shape
    return (h * s * d, s * d, d)


def padded(q, k, v, cu_seqlens_q, cu_seqlens_k, causal):
    cu_q, cu_k = check_varlen_inputs(q, k, v, cu_seqlens_q, cu_seqlens_k, causal)
    _need_gpu("padded")
    import cupy

    h, kvh = q.shape[1], k.shape[1]
    batch = len(cu_q) - 1
    max_q, max_k = max(int(np.max(np.diff(cu_q))), 1), max(int(np.max(np.diff(cu_k))), 1)
    d_q, d_k, d_v, d_cq, d_ck = launch.to_device(q, k, v, cu_seqlens_q, cu_seqlens_k)
    pq = pad(d_q, d_cq, max_q, left=True)  # queries end at the last padded row: bottom-right causal lines up
    pk, pv = pad(d_k, d_ck, max_k, left=False), pad(d_v, d_ck, max_k, left=False)
    po = launch.empty(pq.shape, np.float16)
    c_q, c_k, c_v, c_o = (cupy.asarray(a) for a in (pq, pk, pv, po))
    day67.launch_flash(c_q, c_k, c_v, c_o, causal, seq_q=max_q, seq_k=max_k, batch=batch, heads=h, kv_heads=kvh,
                       strides=tuple(_dense_strides(a) for a in (c_q, c_k, c_v, c_o)),
                       cu_seqlens_q=cupy.asarray(d_cq), cu_seqlens_k=cupy.asarray(d_ck), pieces=PADDED_PIECES)
    out = unpad(po, d_cq, int(cu_q[-1]), left=True)
    return launch.result(out, q, k, v)


# ---- v3: packed (the template with a varlen piece (d)) --------------------------------------------------

def packed_seq_info_source() -> str:
    """Piece (d) of day 67's template for packed sequences: CUDA C defining

        __device__ __forceinline__ SeqInfo seq_info(const FlashParams& p, int batch)

    returning {q_row0, k_row0, seq_q, seq_k} of sequence `batch`: its first query row and first key
    row in the packed buffers (p.cu_seqlens_q[batch], p.cu_seqlens_k[batch]) and its two lengths (the
    differences of consecutive entries). The core adds q_row0 / k_row0 row strides to the pointers
    (the batch stride is 0), masks keys >= seq_k (zero-filled, never read), aligns causal to seq_k -
    seq_q and returns blocks whose row0 >= seq_q."""
    # EXERCISE: return the CUDA C of seq_info: the sequence's offsets and lengths from p.cu_seqlens_q, p.cu_seqlens_k
    return r"""
// Piece (d) PACKED: sequence `batch` is query rows cu_seqlens_q[batch] .. cu_seqlens_q[batch + 1] - 1 and
// key rows cu_seqlens_k[batch] .. cu_seqlens_k[batch + 1] - 1 of the packed buffers.
__device__ __forceinline__ SeqInfo seq_info(const FlashParams& p, int batch) {
    const int q0 = p.cu_seqlens_q[batch], k0 = p.cu_seqlens_k[batch];
    return SeqInfo{q0, k0, p.cu_seqlens_q[batch + 1] - q0, p.cu_seqlens_k[batch + 1] - k0};
}
"""


def packed_pieces() -> day67.FlashPieces:
    """day 67's PIECES with piece (d) replaced and day 68's piece (b): a causal block stops at its diagonal."""
    return dataclasses.replace(day67.PIECES, seq_info=packed_seq_info_source(), key_tiles=day68.KEY_TILES_CAUSAL)


def packed_source(dim: int = 128, causal: bool = False) -> str:
    """The full CUDA C of the packed kernel: day 67's flash_source with packed_pieces()."""
    return day67.flash_source(dim, causal, packed_pieces())


def _launch_packed(c_q, c_k, c_v, c_o, c_cq, c_ck, causal, *, batch, heads, kv_heads, max_q, max_k, strides):
    h, kvh = heads, kv_heads
    day67.launch_flash(c_q, c_k, c_v, c_o, causal, seq_q=max_q, seq_k=max_k, batch=batch, heads=h, kv_heads=kvh,
                       strides=strides, cu_seqlens_q=c_cq, cu_seqlens_k=c_ck, pieces=packed_pieces())


def packed(q, k, v, cu_seqlens_q, cu_seqlens_k, causal):
    cu_q, cu_k = check_varlen_inputs(q, k, v, cu_seqlens_q, cu_seqlens_k, causal)
    _need_gpu("packed")
    import cupy

    h, d = q.shape[1], q.shape[2]
    batch = len(cu_q) - 1
    max_q, max_k = int(np.max(np.diff(cu_q))), int(np.max(np.diff(cu_k)))
    d_q, d_k, d_v, d_cq, d_ck = launch.to_device(q, k, v, cu_seqlens_q, cu_seqlens_k)
    out = launch.empty((int(cu_q[-1]), h, d), np.float16)
    if max_q > 0:
        c_q, c_k, c_v, c_o, c_cq, c_ck = (cupy.asarray(a) for a in (d_q, d_k, d_v, out, d_cq, d_ck))
        for name, a in (("q", c_q), ("k", c_k), ("v", c_v)):
            if a.data.ptr % 16:
                raise ValueError(f"{name}: expected a 16-byte aligned base (cp.async copies 16 bytes)")
        # packed strides: batch 0 (the sequence's offset is q_row0 / k_row0 rows), head dim, row heads x dim
        strides = ((0, d, h * d), (0, d, k.shape[1] * d), (0, d, k.shape[1] * d), (0, d, h * d))
        _launch_packed(c_q, c_k, c_v, c_o, c_cq, c_ck, causal, batch=batch, heads=h, kv_heads=k.shape[1],
                       max_q=max_q, max_k=max(max_k, 1),
                       strides=strides)
    return launch.result(out, q, k, v)


# The interfaces.
optimized_varlen = packed
naive = padded  # the day's starting point


def optimized(q, k, v, causal):
    """The unit's dense interface, (batch, heads, seq_q, dim) float16: `batch` sequences of equal
    lengths. On a GPU the packed kernel reads the dense arrays in place (cu_seqlens b seq, row stride
    dim, head stride seq dim, batch stride (heads - 1) seq dim: b (heads - 1) seq dim + b seq dim = the
    batch's start); in the simulator the batch is transposed to the packed layout for varlen_fragments."""
    day67.check_inputs(q, k, v, causal)
    b, h, sq, d = q.shape
    kvh, sk = k.shape[1], k.shape[2]
    cu_q = (np.arange(b + 1) * sq).astype(np.int32)
    cu_k = (np.arange(b + 1) * sk).astype(np.int32)
    if not ON_GPU:
        host = [a if isinstance(a, np.ndarray) else a.copy_to_host() for a in (q, k, v)]
        pq, pk, pv = (a.transpose(0, 2, 1, 3).reshape(-1, a.shape[1], d).copy() for a in host)
        out = varlen_fragments(pq, pk, pv, cu_q, cu_k, causal).reshape(b, sq, h, d).transpose(0, 2, 1, 3)
        out = np.ascontiguousarray(out)
        return out if launch.on_host(q, k, v) else launch.to_device(out)[0]
    import cupy

    d_q, d_k, d_v = (cupy.asarray(a) for a in (q, k, v))
    result = launch.empty(q.shape, np.float16)
    c_o = cupy.asarray(result)
    for name, a in (("q", d_q), ("k", d_k), ("v", d_v), ("out", c_o)):
        day67._strides(name, a)  # contiguous rows, strides of 8 elements, 16-byte bases
    strides = tuple(((x.shape[1] - 1) * x.shape[2] * d, x.shape[2] * d, d) for x in (d_q, d_k, d_v, c_o))
    _launch_packed(d_q, d_k, d_v, c_o, cupy.asarray(cu_q), cupy.asarray(cu_k), causal, batch=b, heads=h,
                   kv_heads=kvh, max_q=sq, max_k=sk, strides=strides)
    return launch.result(result, q, k, v)


def library(q, k, v, cu_seqlens_q, cu_seqlens_k, causal):
    """flash_attn_varlen_func (FlashAttention-2's own varlen entry) if flash_attn is installed, else torch
    SDPA's flash backend once per sequence (torch's SDPA has no varlen entry)."""
    import torch

    from course import cuda as course_cuda

    cu_q, cu_k = _host_ints(cu_seqlens_q), _host_ints(cu_seqlens_k)
    tq, tk, tv = (torch.as_tensor(a, device="cuda") for a in (q, k, v))
    total = int(cu_q[-1])
    try:
        from flash_attn import flash_attn_varlen_func
    except ImportError:
        flash_attn_varlen_func = None
    if flash_attn_varlen_func is not None:
        out = flash_attn_varlen_func(tq[:total], tk, tv, torch.as_tensor(cu_q, device="cuda"),
                                     torch.as_tensor(cu_k, device="cuda"), int(np.max(np.diff(cu_q))),
                                     int(np.max(np.diff(cu_k))), causal=bool(causal))
    else:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        from torch.nn.attention.bias import causal_lower_right
        from torch.nn.functional import scaled_dot_product_attention

        out = torch.zeros((total,) + tuple(tq.shape[1:]), dtype=tq.dtype, device="cuda")
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            for b in range(len(cu_q) - 1):
                q0, q1, k0, k1 = int(cu_q[b]), int(cu_q[b + 1]), int(cu_k[b]), int(cu_k[b + 1])
                if q1 == q0 or k1 == k0:
                    continue
                sq, sk = q1 - q0, k1 - k0
                mask = causal_lower_right(sq, sk) if causal and sq != sk else None
                o = scaled_dot_product_attention(tq[q0:q1].transpose(0, 1)[None], tk[k0:k1].transpose(0, 1)[None],
                                                 tv[k0:k1].transpose(0, 1)[None], attn_mask=mask,
                                                 is_causal=bool(causal) and sq == sk,
                                                 enable_gqa=tq.shape[1] != tk.shape[1])
                out[q0:q1] = o[0].transpose(0, 1)
    return out.cpu().numpy() if isinstance(q, np.ndarray) else course_cuda.as_cuda_array(out)
