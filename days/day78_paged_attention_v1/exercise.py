"""Day 78 exercise: PagedAttention v1 -- one decode step of attention over a paged KV cache.

For each sequence s and query head h (KV head g = h // (num_heads // num_kv_heads)):

    out[s, h] = softmax(scale * q[s, h] . K[s, g, :ctx]) @ V[s, g, :ctx]

Token t of sequence s lives in physical block block_tables[s, t // block_size], row t % block_size.
Slots past context_lens[s] hold garbage (NaN in the tests): never read them.

Write the two kernels; validation and launches are given (inputs and the reference live in
solutions/day78_paged_attention_v1.py).
Grade with:  make check DAY=78
"""

import functools
import math

import numpy as np

from course import DEVICE, cuda, launch
from numba import float32, uint32, uint64  # noqa: F401  (uint32, uint64: for the kernel you write)

TITLE = "PagedAttention v1"
MEMORY_SPACE = "global + shared"
VERSIONS = ("naive", "optimized")
BOUND = "memory"

WARP = 32
# optimized: 128 threads per (sequence, head) block; 64 in the simulator, which pays per thread
NUM_WARPS = 2 if DEVICE.kind == "sim" else 4
TOKENS = 4  # optimized: tokens per thread group per trip, all loads issued before any reduction
MAX_HEAD_DIM = 128  # q and the accumulator live in registers, so the bound is fixed
MAX_COLS = MAX_HEAD_DIM // WARP
LOG2E = 1.4426950408889634  # exp(x) = exp2(x * log2 e): fold log2 e into the query's scale once
NO_LOGIT = -1.0e30  # the running max before any token: finite, far below any real logit
NAIVE_THREADS = 64


# --- validation (shared by days 79-81) ----------------------------------------------------------


def check_inputs(query, key_cache, value_cache, block_tables, context_lens, scale, *, max_head_dim=None):
    """ValueError, before any launch, unless the six inputs describe a valid decode step.

    Shapes and dtypes are always checked. The contents of block_tables and context_lens are checked
    when they are NumPy arrays; device arrays are trusted (reading them back would stall the launch
    queue; serving engines trust the scheduler's metadata the same way).
    """
    launch.check_array("query", query, dtype=np.float32, ndim=3)
    launch.check_array("key_cache", key_cache, dtype=(np.float32, np.float16), ndim=4)
    launch.check_array("value_cache", value_cache, dtype=key_cache.dtype, shape=key_cache.shape)
    num_seqs, num_heads, head_dim = query.shape
    num_blocks, block_size, num_kv_heads, cache_dim = key_cache.shape
    if cache_dim != head_dim:
        raise ValueError(f"key_cache: expected head_dim {head_dim} (from query), got {cache_dim}")
    if num_kv_heads < 1 or num_heads % num_kv_heads:
        raise ValueError(f"num_heads ({num_heads}) must be a multiple of num_kv_heads ({num_kv_heads})")
    limit = max_head_dim or MAX_HEAD_DIM
    if head_dim % WARP or not 0 < head_dim <= limit:
        raise ValueError(f"head_dim must be a multiple of {WARP} up to {limit}, got {head_dim}")
    launch.check_array("block_tables", block_tables, dtype=np.int32, ndim=2)
    if block_tables.shape[0] != num_seqs:
        raise ValueError(f"block_tables: expected {num_seqs} rows (one per sequence), "
                         f"got shape {tuple(block_tables.shape)}")
    launch.check_array("context_lens", context_lens, dtype=np.int32, shape=(num_seqs,))
    if not isinstance(scale, (int, float, np.floating)) or not math.isfinite(scale):
        raise ValueError(f"scale: expected a finite number, got {scale!r}")
    if isinstance(context_lens, np.ndarray):
        capacity = block_tables.shape[1] * block_size
        bad = np.flatnonzero((context_lens < 1) | (context_lens > capacity))
        if bad.size:
            s = int(bad[0])
            raise ValueError(f"context_lens[{s}] = {int(context_lens[s])}: expected 1..{capacity} "
                             f"(block_tables has {block_tables.shape[1]} blocks of {block_size})")
        if isinstance(block_tables, np.ndarray):
            for s in range(num_seqs):
                used = block_tables[s, :math.ceil(int(context_lens[s]) / block_size)]
                out = np.flatnonzero((used < 0) | (used >= num_blocks))
                if out.size:
                    i = int(out[0])
                    raise ValueError(f"block_tables[{s}, {i}] = {int(used[i])}: not a block of the cache "
                                     f"(0..{num_blocks - 1})")


# --- v1 naive: one thread per (sequence, head) ----------------------------------------------------


@cuda.jit
def paged_attention_naive_kernel(out, query, key_cache, value_cache, block_tables, context_lens, scale):
    """One thread per (sequence, head): i = cuda.grid(1) -> seq = i // num_heads, head = i % num_heads.

    Walk the tokens t = 0 .. ctx-1 through the block table (block = block_tables[seq, t // block_size],
    row t % block_size). Three passes: (1) the largest logit m = max_t scale * q.k_t; (2) zero the
    output row, then for each token p = exp(logit - m), total += p, out[seq, head, :] += p * v_t;
    (3) divide the row by total. Convert cache elements with float32(...): the cache may be float16.
    """
    raise NotImplementedError("Day 78: guard i < num_seqs * num_heads, then three loops over the "
                              "tokens through the block table (25 lines)")



# --- v2 optimized: one block per (sequence, head), thread groups over tokens -----------------------


def lane_layout(head_dim: int, itemsize: int) -> tuple[int, int, int, int, int]:
    """How a cache row is shared out: (elements per 32-bit word, words per row, lanes per token,
    words per lane, elements per lane). Lanes per token is the largest power of two that leaves each
    lane at least 8 words (32 bytes: one whole sector per row), so a token's dot product needs only
    log2(lanes) shuffles and one warp instruction works on 32 / lanes tokens at once."""
    per_word = 4 // itemsize
    row_words = head_dim // per_word
    group = 1
    while group < WARP and row_words % (2 * group) == 0 and row_words // (2 * group) >= 8:
        group *= 2
    words = row_words // group
    return per_word, row_words, group, words, words * per_word


def cache_words(cache):
    """The cache as one flat run of 32-bit words: free for a contiguous array (same memory), and the
    kernel then addresses every element with one offset instead of four 64-bit indices."""
    flat = cache.reshape(cache.size)
    return flat.view(np.uint32)


@functools.cache
def v1_kernel(head_dim: int, cache_dtype: str):
    """The optimized kernel for one (head_dim, cache dtype). Numba compiles the closure's Python ints
    as constants: the per-lane arrays get fixed sizes, every loop over them unrolls, and the word
    offsets inside a row fold into the load instructions."""
    # Constants for the kernel you write (unused until then).
    elem = np.dtype(cache_dtype).type  # noqa: F841
    PER_WORD, ROW_WORDS, G, WL, VEC = lane_layout(head_dim, np.dtype(cache_dtype).itemsize)
    NG = WARP // G  # noqa: F841  (tokens a warp works on side by side, one per thread group)
    KW = TOKENS * WL  # noqa: F841  (words of K, and of V, a lane holds per trip)
    HEAD_DIM = head_dim  # noqa: F841

    @cuda.jit(fastmath=True)
    def paged_attention_v1_kernel(out, query, key_words, value_words, block_tables, context_lens, scale,
                                  block_size, num_kv_heads):
        """One block per (sequence, head): blockIdx.y = seq, blockIdx.x = head, NUM_WARPS warps.

        key_words / value_words: the caches as flat uint32 words (see cache_words); token row r of
        physical block b, KV head h starts at word (b * block_size + r) * num_kv_heads * ROW_WORDS
        + h * ROW_WORDS. scale already includes log2(e): use math.exp2 throughout.

        - Lane `lane` is in thread group grp = lane // G and holds slice gl = lane % G of a row:
          WL words = VEC elements (d = gl * VEC + e). Keep q * scale and the accumulator for them in
          cuda.local.array(VEC, float32); load words into cuda.local.array(KW, uint32) and read them
          as elements through buf.view(elem).
        - Warp w takes pages w, w + NUM_WARPS, ...: base = uint64(block id) * page_words + the lane's
          words (64-bit once per page), row offsets in uint32. Per trip, group grp takes rows
          t0 + u * NG + grp, u < TOKENS: issue all the loads first, clamping dead rows onto row
          n_tok - 1 (never load past the context), then mask their logits to -inf.
        - Dot products: partial sums per lane, then shfl_xor_sync over offsets G/2, ..., 1.
        - Online softmax per group: running max m (start at NO_LOGIT) and exp-sum l; rescale l and
          acc by exp2(m - m_new) before adding exp2(s - m_new) * v.
        - Fold the NG groups with shfl_xor_sync over offsets G, 2G, ..., 16 (m, l and each acc[e]),
          then merge the warps through cuda.shared.array((NUM_WARPS, HEAD_DIM), float32) plus their
          m and l, cuda.syncthreads(), out[d] = sum_w acc_w[d] 2^(m_w - M) / sum_w l_w 2^(m_w - M).
        """
        raise NotImplementedError("Day 78: thread groups over tokens, word loads first, a shfl_xor dot "
                                  "product, an online softmax per group, a shuffle fold and a "
                                  "shared-memory merge (75 lines)")

    return paged_attention_v1_kernel


_SIG = ("void(float32[:, :, ::1], float32[:, :, ::1], float16[:, :, :, ::1], float16[:, :, :, ::1], "
        "int32[:, ::1], int32[::1], float32)")
_SIG_WORDS = ("void(float32[:, :, ::1], float32[:, :, ::1], uint32[::1], uint32[::1], int32[:, ::1], "
              "int32[::1], float32, int32, int32)")
KERNELS = {
    "naive": (paged_attention_naive_kernel, _SIG),
    "optimized": (v1_kernel(128, "float16"), _SIG_WORDS),  # the benchmark's head_dim and dtype
}


def naive(query, key_cache, value_cache, block_tables, context_lens, scale):
    check_inputs(query, key_cache, value_cache, block_tables, context_lens, scale)
    args = launch.to_device(query, key_cache, value_cache, block_tables, context_lens)
    out = launch.empty(query.shape, np.float32)  # (num_seqs, num_heads, head_dim)
    n = query.shape[0] * query.shape[1]
    paged_attention_naive_kernel[launch.blocks(n, NAIVE_THREADS), NAIVE_THREADS](out, *args, float32(scale))
    return launch.result(out, query, key_cache)


def optimized(query, key_cache, value_cache, block_tables, context_lens, scale):
    check_inputs(query, key_cache, value_cache, block_tables, context_lens, scale)
    q, kc, vc, tables, lens = launch.to_device(query, key_cache, value_cache, block_tables, context_lens)
    out = launch.empty(query.shape, np.float32)
    num_seqs, num_heads, head_dim = query.shape
    kernel = v1_kernel(head_dim, np.dtype(key_cache.dtype).name)
    grid = (num_heads, num_seqs)  # (heads, seqs): a group's heads run side by side and share L2
    kernel[grid, NUM_WARPS * WARP](out, q, cache_words(kc), cache_words(vc), tables, lens,
                                   float32(scale * LOG2E), key_cache.shape[1], key_cache.shape[2])
    return launch.result(out, query, key_cache)
