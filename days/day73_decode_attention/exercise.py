"""Day 73 exercise: decode attention over a contiguous KV cache.

out[s, h] = softmax(scale * q[s, h] . K[s, :ctx, g]) @ V[s, :ctx, g], g = h // (num_heads // num_kv_heads).
Rows of the cache past a sequence's context hold garbage (NaN in the tests): never let them in.
Write the naive kernel, then the optimized kernel inside its factory; the lane layout, the factory's
constants, validation and the host functions are given.
Grade with:  make check DAY=73
"""

import functools
import math  # noqa: F401  (math.exp and math.exp2, in the kernels you write)

import numpy as np

from course import DEVICE, cuda, launch
from numba import float32, uint32, uint64  # noqa: F401  (uint32, uint64: the optimized kernel's offsets)

TITLE = "Decode attention over a contiguous cache"
MEMORY_SPACE = "shared + register"
VERSIONS = ("naive", "optimized")
BOUND = "memory"
WARP = 32
# optimized: 128 threads per (sequence, head) block; 64 in the simulator, which pays per thread
WARPS = 2 if DEVICE.kind == "sim" else 4
ROW_STEP = 16  # optimized: rows a warp starts per trip
MAX_HEAD_DIM = 128  # q and the output row live in registers, 16 columns per lane
NAIVE_THREADS = 64
FULL_MASK = 0xFFFFFFFF
LOG2E = 1.4426950408889634  # exp(x) = exp2(x * log2 e): fold log2 e into the query's scale once
# float32 constants, not Python floats: a bare -math.inf or 1e30 makes Numba carry the whole softmax
# (max, exp, the running sums) in float64, several times slower on every GPU and far slower on most.
NEG_INF = np.float32(-math.inf)
DEAD = NEG_INF  # the logit of a row past the context
NO_LOGIT = np.float32(-1.0e30)  # the running max before any token: finite, far below any real logit


# --- v1 ---------------------------------------------------------------------------------------------------

@cuda.jit
def decode_naive_kernel(query, key_cache, value_cache, context_lens, scale, out):
    # query, out: (num_seqs, num_heads, head_dim); caches: (num_seqs, max_len, num_kv_heads, head_dim)
    """One thread per (sequence, head): i = s * num_heads + h; guard i. Pass 1 walks t < ctx computing
    score = scale * q . K[s, t, g] and keeps the running max m and total = sum of exp(score - m),
    rescaling total by exp(m_old - m_new) when the max grows. Pass 2 zeroes out[s, h, :] and adds
    exp(score - m) / total * V[s, t, g, :] for every token."""
    raise NotImplementedError("Day 73: i -> s, h, g; pass 1: online max m and sum over tokens; pass 2: "
                              "zero out[s, h], then add exp of score * scale - m, over the sum, times V "
                              "row (25 lines)")


# --- v2 ---------------------------------------------------------------------------------------------------
#
# What the first design of this kernel cost (lanes over head_dim, one token per warp step): a 2-byte
# load per lane per element, each behind 4-D signed index arithmetic (multiply by strides, test for a
# negative index and wrap it), and five shuffles per token: ~200 instructions per token and head for
# 512 bytes of K and V. The SMs' issue rate, not HBM, set the pace (~2 % of the copy rate). The design
# below spends ~40 PTX instructions per token and head, half of them free register moves and unpacking:
#
# - The caches are read as flat 8-byte words (four fp16 or two fp32 per load), at unsigned offsets:
#   one add per load and no wraparound test.
# - A kernel is compiled per (head_dim, cache dtype). The sizes below are then Python constants:
#   every per-lane loop unrolls and the per-lane arrays live in registers.
# - G lanes share a token (8 at head_dim 128), each holding 16 columns of q and of the output. Lane j
#   of a group loads words j, j + G, j + 2G, ...: one warp instruction reads G * 8 contiguous bytes of
#   each of its 32 / G rows, whole 32-byte sectors.
# - A warp trip covers 16 rows (TOK rows per group) and issues all their loads before any arithmetic.
# - A dot product needs log2(G) shuffles (3), shared by the trip's TOK rows in flight.


def lane_layout(head_dim: int, itemsize: int) -> tuple[int, int, int, int, int]:
    """How one cache row (one token of one KV head) is shared out: (elements per 8-byte word, words
    per row, lanes per token G, words per lane, elements per lane). G is the largest power of two (the
    butterfly needs one) that divides the row's words, up to head_dim // 16: 16 elements per lane."""
    per_word = 8 // itemsize
    row_words = head_dim // per_word
    lanes = 1
    while 2 * lanes <= head_dim // 16 and row_words % (2 * lanes) == 0:
        lanes *= 2
    words = row_words // lanes
    return per_word, row_words, lanes, words, words * per_word


@functools.cache
def decode_kernel(head_dim: int, cache_dtype: str, num_warps: int = WARPS):
    """The optimized kernel for one (head_dim, cache dtype). Launch: grid (num_heads, num_seqs),
    num_warps * 32 threads; arguments (query (num_seqs, num_heads, head_dim), key_words, value_words
    (the caches as flat uint64 words), context_lens, scale * log2(e), num_kv_heads, max_len, out)."""
    elem = np.dtype(cache_dtype).type  # noqa: F841  (read by your kernel: a compile-time constant)
    PW, ROW_WORDS, G, WL, VEC = lane_layout(head_dim, np.dtype(cache_dtype).itemsize)
    NG = WARP // G  # rows a warp works on side by side, one per group of G lanes (4 at head_dim 128)
    TOK = max(1, ROW_STEP // NG)  # rows per group per trip
    TRIP = NG * TOK  # noqa: F841  (rows per warp trip: 16)
    KW = TOK * WL  # noqa: F841  (words of K, and of V, a lane holds per trip)
    NW, HEAD_DIM = num_warps, head_dim  # noqa: F841  (warps per block; the shared row's length)

    @cuda.jit(fastmath=True)  # exp2 -> one ex2.approx instruction; the softmax is float32 anyway
    def decode_attention_kernel(query, key_words, value_words, context_lens, scale, num_kv_heads, max_len,
                                out):
        """One block of NW warps per (query head h = blockIdx.x, sequence seq = blockIdx.y).
        1. Indices: warp, lane = tid // WARP, tid % WARP; grp = lane // G (the row of each trip this
           lane's group takes); gl = lane % G (its words: gl, gl + G, ...); kv_head; ctx.
           row_words = uint32(num_kv_heads * ROW_WORDS); base = uint64(seq) * uint64(max_len) *
           uint64(row_words) + uint64(kv_head * ROW_WORDS + gl): word gl of row 0 of this KV head.
        2. Registers: cuda.local.array for q, acc (VEC float32), s (TOK float32), kbuf, vbuf (KW uint64);
           k = kbuf.view(elem), v = vbuf.view(elem). q[w * PW + j] = query[seq, h, (gl + G * w) * PW + j]
           * scale (scale already carries log2 e), acc = 0; m = NO_LOGIT, l = float32(0.0).
        3. for t0 in range(warp * TRIP, ctx, NW * TRIP): loads first -- for each u < TOK,
           row = min(t0 + u * NG + grp, ctx - 1) (a dead row re-reads the last live one),
           off = base + uint64(uint32(row)) * uint64(row_words), kbuf[u * WL + w] = key_words[off +
           uint64(G * w)] (and vbuf). Then s[u] = sum over e < VEC of q[e] * float32(k[u * VEC + e]);
           butterfly o = G // 2, ..., 1: s[u] += cuda.shfl_xor_sync(FULL_MASK, s[u], o). Dead rows
           (t0 + u * NG + grp >= ctx) get s[u] = DEAD; m_new = max(m, s...); correction =
           math.exp2(m - m_new); rescale l and acc; p = math.exp2(s[u] - m_new); l += p;
           acc[e] += p * float32(v[u * VEC + e]); m = m_new.
        4. Fold the NG groups: for o = G, 2G, ... < WARP, shuffle m, l and every acc[e] with xor o and
           combine the two partial softmaxes (each side scaled by exp2(its max - the larger max)).
        5. sm_acc (NW, HEAD_DIM), sm_m, sm_l (NW) in shared memory: group 0's lanes write their columns
           of acc, lane 0 writes m and l; cuda.syncthreads(); then for d in range(tid, HEAD_DIM, NW * WARP)
           merge the warps the same way and write out[seq, h, d] = o_d / total."""
        raise NotImplementedError("Day 73: indices and base word; q, acc in local arrays; 16-row trips: "
                                  "loads first, dots, log2 G shuffles, online softmax in base 2; fold the "
                                  "groups by shuffles; merge the warps in shared memory (90 lines)")

    return decode_attention_kernel


def cache_words(cache):
    """The cache as one flat run of 8-byte words: free for a contiguous array (same memory)."""
    return cache.reshape(cache.size).view(np.uint64)


_SIG = ("void(float32[:, :, ::1], float16[:, :, :, ::1], float16[:, :, :, ::1], int32[::1], float32, "
        "float32[:, :, ::1])")
_SIG_WORDS = ("void(float32[:, :, ::1], uint64[::1], uint64[::1], int32[::1], float32, int32, int32, "
              "float32[:, :, ::1])")
KERNELS = {
    "naive": (decode_naive_kernel, _SIG),
    "optimized": (decode_kernel(128, "float16"), _SIG_WORDS),  # the benchmark's shape
}


def _check(query, key_cache, value_cache, context_lens, scale):
    launch.check_array("query", query, dtype=np.float32, ndim=3)
    seqs, heads, head_dim = query.shape
    launch.check_array("key_cache", key_cache, dtype=(np.float16, np.float32), ndim=4)
    _, max_len, kv_heads, _ = key_cache.shape
    launch.check_array("key_cache", key_cache, shape=(seqs, None, None, head_dim))
    launch.check_array("value_cache", value_cache, dtype=key_cache.dtype, shape=key_cache.shape)
    launch.check_array("context_lens", context_lens, dtype=np.int32, shape=(seqs,))
    if head_dim % WARP or not 0 < head_dim <= MAX_HEAD_DIM:  # the optimized kernel's lane layout
        raise ValueError(f"head_dim: expected a multiple of {WARP} up to {MAX_HEAD_DIM}, got {head_dim}")
    if kv_heads < 1 or heads % kv_heads:
        raise ValueError(f"num_heads ({heads}) must be a multiple of num_kv_heads ({kv_heads})")
    if not isinstance(scale, (float, np.floating)) or not scale > 0:
        raise ValueError(f"scale: expected a positive float, got {scale!r}")
    if isinstance(context_lens, np.ndarray) and seqs:  # device lengths are trusted: checking costs a copy
        if context_lens.min() < 1 or context_lens.max() > max_len:
            raise ValueError(f"context_lens: expected 1..{max_len} (the cache's max_len), "
                             f"got {context_lens.min()}..{context_lens.max()}")


def naive(query, key_cache, value_cache, context_lens, scale):
    _check(query, key_cache, value_cache, context_lens, scale)
    d_in = launch.to_device(query, key_cache, value_cache, context_lens)
    out = launch.empty(query.shape, np.float32)
    threads = query.shape[0] * query.shape[1]
    decode_naive_kernel[launch.blocks(threads, NAIVE_THREADS), NAIVE_THREADS](*d_in, np.float32(scale), out)
    return launch.result(out, query, key_cache, value_cache, context_lens)


def optimized(query, key_cache, value_cache, context_lens, scale):
    _check(query, key_cache, value_cache, context_lens, scale)
    q, kc, vc, lens = launch.to_device(query, key_cache, value_cache, context_lens)
    out = launch.empty(query.shape, np.float32)
    _, max_len, kv_heads, head_dim = key_cache.shape
    kernel = decode_kernel(head_dim, np.dtype(key_cache.dtype).name)
    grid = (query.shape[1], query.shape[0])  # (num_heads, num_seqs)
    kernel[grid, WARPS * WARP](q, cache_words(kc), cache_words(vc), lens, float32(scale * LOG2E), kv_heads,
                               max_len, out)
    return launch.result(out, query, key_cache, value_cache, context_lens)
