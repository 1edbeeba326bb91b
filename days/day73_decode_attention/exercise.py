"""Day 73 exercise: decode attention over a contiguous KV cache -- one new query token per sequence.

out[s, h] = softmax(scale * q[s, h] . K[s, :ctx, g]) @ V[s, :ctx, g], with g = h // (num_heads //
num_kv_heads) the KV head that query head h reads (GQA; MQA when num_kv_heads = 1). Rows of the
cache past a sequence's context hold garbage (NaN in the tests): never let them in.

v1 naive      a thread per (sequence, head), two passes over the tokens: 2048 threads, nothing coalesced.
v2 optimized  a block per (sequence, KV head, 512-row partition) holding the GQA group's query heads:
              each K/V word loaded and converted once for all of them; 8-byte words, 8 lanes a token,
              the next trip's loads in flight, base-2 online softmax; a small kernel merges partitions.

Napkin math (bench: 64 sequences, 32 query heads over 8 KV heads, head_dim 128, context 4096, float16
cache): K and V hold 64 * 4096 * 8 * 128 * 2 B * 2 = 1.07 GB; the FLOPs are 2 * 2 * 64 * 32 * 4096 *
128 = 4.3 GFLOP. 4 FLOP per byte, while the H200 can do ~12 FP32 FLOP per byte it reads (51 TFLOP/s /
4.1 TB/s): decode is memory-bound. Floor: 1.07 GB / 4.1 TB/s = 262 us. The issue budget is tight too:
in 262 us, 64 * 32 * 4096 = 8.4 M (token, head) pairs against 132 SMs * 4 schedulers * 1.98 GHz = 1.05e12
warp instructions a second: ~33 warp instructions per (token, head). A first design spent ~200; a block
per query head ~40, and made the L2 serve each row to 4 blocks. With the group in one block a word is
unpacked once for 4 heads. The bench's contexts are ragged (1..4096, 562 MB live, floor ~134 us): the
partitions keep the longest sequences from running alone on a few SMs at the end.

What you write (each raises NotImplementedError with its hint until you do):
  decode_naive_kernel                    i -> s, h, g; pass 1: online max and sum of exp over tokens; pass 2: zero
                                         out[s, h], add p * V rows (28 lines)
  decode_kernel.decode_attention_kernel  HG heads a block, next trip's loads in flight, G-lane dots, online softmax,
                                         fold, merge warps (126 lines)
Everything else in this file is given. Grade with:  make check DAY=73
"""

import functools
import math

import numpy as np

from course import DEVICE, cuda, launch
from numba import float32, int32, uint32, uint64

TITLE = "Decode attention over a contiguous cache"
MEMORY_SPACE = "shared + register"
VERSIONS = ("naive", "optimized")
# n = num_seqs, or (num_seqs, num_heads, num_kv_heads, head_dim, max_len, dtype).
TEST_SIZES = (1, 3, (2, 4, 1, 32, 5, "float32"), (1, 2, 2, 96, 33, "float16"), (2, 2, 1, 128, 9, "float16"),
              (1, 2, 1, 64, 20, "float32"))
BENCH_SIZES = ((64, 32, 8, 128, 4096, "float16"),)
BOUND = "memory"
RTOL = 5e-4  # float32 sums of exp-weighted rows over thousands of tokens
ERROR_FLOOR = 1e-2  # outputs average thousands of random rows towards zero (course.checking: the floor)
WARP = 32
# optimized: 128 threads per (sequence, head) block; 64 in the simulator, which pays per thread
WARPS = 2 if DEVICE.kind == "sim" else 4
ROW_STEP = 16  # optimized: rows a warp trip covers at one or two heads a block (half that at 3-4)
MAX_GROUP = 4  # optimized: query heads of one KV head per block (a larger group is split in equal chunks)
# optimized: rows per partition, one block each (0: the whole cache, no merge). At the bench, 4096-row
# contexts in 8 partitions; in the simulator small enough that the tests' contexts span several.
PART_TOKENS = 32 if DEVICE.kind == "sim" else 512
MAX_HEAD_DIM = 128  # q and the output row live in registers, 16 columns per lane
NAIVE_THREADS = 64
FULL_MASK = 0xFFFFFFFF
LOG2E = 1.4426950408889634  # exp(x) = exp2(x * log2 e): fold log2 e into the query's scale once
# float32 constants, not Python floats: a bare -math.inf or 1e30 makes Numba carry the whole softmax
# (max, exp, the running sums) in float64, several times slower on every GPU and far slower on most.
NEG_INF = np.float32(-math.inf)
DEAD = NEG_INF  # the logit of a row past the context
NO_LOGIT = np.float32(-1.0e30)  # the running max before any token: finite, far below any real logit


def _geometry(n):
    if isinstance(n, (tuple, list)):
        seqs, heads, kv_heads, head_dim, max_len, dtype = n
        return int(seqs), int(heads), int(kv_heads), int(head_dim), int(max_len), np.dtype(dtype)
    return int(n), 4, 2, 32, 24, np.dtype(np.float16)


def make_inputs(n, seed: int = 0):
    """Random q, K, V; context lengths from 1 to max_len; every row past a context holds NaN."""
    seqs, heads, kv_heads, head_dim, max_len, dtype = _geometry(n)
    rng = np.random.default_rng(seed)
    query = rng.standard_normal((seqs, heads, head_dim), dtype=np.float32)
    key_cache = rng.standard_normal((seqs, max_len, kv_heads, head_dim)).astype(dtype)
    value_cache = rng.standard_normal((seqs, max_len, kv_heads, head_dim)).astype(dtype)
    context_lens = rng.integers(1, max_len + 1, size=seqs).astype(np.int32)
    context_lens[0] = max_len
    if seqs > 1:
        context_lens[1] = 1
    for s, ctx in enumerate(context_lens):  # unused rows: the result must not depend on them
        key_cache[s, ctx:] = np.nan
        value_cache[s, ctx:] = np.nan
    return query, key_cache, value_cache, context_lens, 1.0 / math.sqrt(head_dim)


def reference(query, key_cache, value_cache, context_lens, scale):
    seqs, heads, head_dim = query.shape
    group = heads // key_cache.shape[2]
    out = np.empty((seqs, heads, head_dim), dtype=np.float32)
    for s in range(seqs):
        ctx = int(context_lens[s])
        for h in range(heads):
            k = key_cache[s, :ctx, h // group].astype(np.float64)  # (ctx, head_dim)
            v = value_cache[s, :ctx, h // group].astype(np.float64)
            scores = scale * (k @ query[s, h].astype(np.float64))
            p = np.exp(scores - scores.max())
            out[s, h] = (p / p.sum()) @ v
    return out


def traffic(query, key_cache, value_cache, context_lens, scale):
    """K and V rows within each context, read once per KV head; q and out; 4 FLOP per (head, token, d)."""
    row = key_cache.shape[2] * key_cache.shape[3] * key_cache.itemsize
    tokens = int(np.asarray(context_lens, dtype=np.int64).sum())
    nbytes = 2 * row * tokens + 2 * query.nbytes + context_lens.nbytes
    return nbytes, 4 * query.shape[1] * query.shape[2] * tokens


# --- v1 ---------------------------------------------------------------------------------------------------

@cuda.jit
def decode_naive_kernel(query, key_cache, value_cache, context_lens, scale, out):
    # query, out: (num_seqs, num_heads, head_dim); caches: (num_seqs, max_len, num_kv_heads, head_dim)
    """One thread per (sequence, head): i = s * num_heads + h; guard i. Pass 1 walks t < ctx computing
    score = scale * q . K[s, t, g] and keeps the running max m and total = sum of exp(score - m),
    rescaling total by exp(m_old - m_new) when the max grows. Pass 2 zeroes out[s, h, :] and adds
    exp(score - m) / total * V[s, t, g, :] for every token."""
    raise NotImplementedError("Day 73: i -> s, h, g; pass 1: online max and sum of exp over tokens; pass 2: zero "
                              "out[s, h], add p * V rows (28 lines)")


# --- v2 ---------------------------------------------------------------------------------------------------
#
# What the first design of this kernel cost (lanes over head_dim, one token per warp step): a 2-byte
# load per lane per element, each behind 4-D signed index arithmetic (multiply by strides, test for a
# negative index and wrap it), and five shuffles per token: ~200 instructions per token and head for
# 512 bytes of K and V. The SMs' issue rate, not HBM, set the pace (~2 % of the copy rate). The design
# below spends a few dozen instructions per (token, KV head) for all the query heads sharing it:
#
# - The caches are read as flat 8-byte words (four fp16 or two fp32 per load), at unsigned offsets:
#   one add per load and no wraparound test.
# - A kernel is compiled per (head_dim, cache dtype, heads per block). The sizes below are then Python
#   constants: every per-lane loop unrolls and the per-lane arrays live in registers.
# - G lanes share a token (8 at head_dim 128), each holding 16 columns of q and of the output. Lane j
#   of a group loads words j, j + G, j + 2G, ...: one warp instruction reads G * 8 contiguous bytes of
#   each of its 32 / G rows, whole 32-byte sectors.
# - A block holds HG query heads of one KV head (the GQA group, or an equal chunk of it): each word of
#   K and V is loaded and converted once and used HG times, so DRAM, L2 and the load pipeline see
#   each KV row once instead of once per query head.
# - Warps take trips of rows round-robin, and each warp issues the next trip's loads before this
#   trip's arithmetic: one trip always in flight while the other is reduced.
# - The context is cut into partitions of PART_TOKENS rows, a block each (FlashDecoding's split):
#   a sequence of 4096 tokens no longer keeps one block busy long after the short ones are done, and
#   a batch of few sequences still fills the GPU. A small merge kernel combines the partitions.


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


def heads_per_block(num_heads: int, num_kv_heads: int, limit: int = MAX_GROUP) -> int:
    """The largest divisor of the GQA group (num_heads // num_kv_heads) up to ``limit``: equal chunks,
    so a block never holds query heads of two KV heads (group 6 at limit 4: 3 + 3, not 4 + 2)."""
    group = num_heads // num_kv_heads
    return max(h for h in range(1, min(group, limit) + 1) if group % h == 0)


def rows_per_group(heads: int, lanes: int) -> int:
    """Rows each lane group takes per trip: ROW_STEP rows per warp trip at one head a block, half that
    at more. Two trips of words are in flight (the prefetch), and q and the accumulators of HG heads
    take 2 * HG * 16 registers a lane at head_dim 128: at HG = 4, 128 of the 255 a thread may hold."""
    rows = max(1, ROW_STEP // (WARP // lanes))
    return rows if heads == 1 else max(1, rows // 2)


@functools.cache
def decode_kernel(head_dim: int, cache_dtype: str, heads: int = 1, num_warps: int = WARPS):
    """The optimized kernel for one (head_dim, cache dtype, query heads per block, warps per block).
    Launch: grid (num_heads // heads, num_seqs, partitions), num_warps * 32 threads; arguments
    (part_out (num_seqs, num_heads, partitions, head_dim), part_max, part_sum (num_seqs, num_heads,
    partitions), query (num_seqs, num_heads, head_dim), key_words, value_words (the caches as flat
    uint64 words), context_lens, scale * log2(e), num_kv_heads, max_len, part_tokens). Each block
    writes its partition's normalized output with its running max and exp-sum (base 2)."""
    elem = np.dtype(cache_dtype).type
    PW, ROW_WORDS, G, WL, VEC = lane_layout(head_dim, np.dtype(cache_dtype).itemsize)
    NG = WARP // G  # rows a warp works on side by side, one per group of G lanes (4 at head_dim 128)
    TOK = rows_per_group(heads, G)  # rows per group per trip
    TRIP = NG * TOK  # rows per warp trip
    KW = TOK * WL  # words of K (and of V) a lane holds per trip
    HG, NW, HEAD_DIM = heads, num_warps, head_dim
    QN, SN, SMN = HG * VEC, HG * TOK, HG * head_dim  # array sizes must be plain constants for Numba

    @cuda.jit(fastmath=True)  # exp2 -> one ex2.approx instruction; the softmax is float32 anyway
    def decode_attention_kernel(part_out, part_max, part_sum, query, key_words, value_words, context_lens,
                                scale, num_kv_heads, max_len, part_tokens):
        """One block of NW warps per (HG query heads of one KV head: h0 = blockIdx.x * HG, sequence
        seq = blockIdx.y, partition blockIdx.z: rows [first, end) = [z * part_tokens, min(first +
        part_tokens, ctx)); return at once if first >= end, the merge never reads that partition).
        1. Indices: warp, lane = tid // WARP, tid % WARP; grp = lane // G (the row of each trip this
           lane's group takes); gl = lane % G (its words: gl, gl + G, ...); kv_head = h0 // group.
           row_words = uint32(num_kv_heads * ROW_WORDS); base = uint64(seq) * uint64(max_len) *
           uint64(row_words) + uint64(kv_head * ROW_WORDS + gl): word gl of row 0 of this KV head.
        2. Registers: cuda.local.array for q, acc (HG * VEC float32), m, l (HG), s (HG * TOK), and two
           trips of words: kbuf, vbuf, kn, vn (KW uint64); k = kbuf.view(elem), v = vbuf.view(elem).
           q[hh * VEC + w * PW + j] = query[seq, h0 + hh, (gl + G * w) * PW + j] * scale (scale
           carries log2 e), acc = 0, m = NO_LOGIT, l = 0.
        3. Trips: t0 = first + warp * TRIP, then += NW * TRIP while t0 < end. Load a trip: for u < TOK,
           row = min(t0 + u * NG + grp, end - 1) (a dead row re-reads the last live one), off = base +
           uint64(uint32(row)) * uint64(row_words), kbuf[u * WL + w] = key_words[off + uint64(G * w)]
           (and vbuf). Load trip one before the loop; in the loop load the next trip into kn, vn
           (if it starts before end), then reduce this one: for each head hh, s[hh * TOK + u] = sum
           over e < VEC of q[hh * VEC + e] * float32(k[u * VEC + e]); butterfly o = G // 2, ..., 1:
           s[i] += cuda.shfl_xor_sync(FULL_MASK, s[i], o). Dead rows (t0 + u * NG + grp >= end) get
           DEAD; per head m_new = max(m, s...), correction = math.exp2(m - m_new), rescale l and acc,
           p = math.exp2(s - m_new), l += p, acc += p * float32(v[u * VEC + e]). Copy kn, vn to kbuf,
           vbuf.
        4. Fold the NG groups: for o = G, 2G, ... < WARP, shuffle m, l and every acc[e] with xor o and
           combine the two partial softmaxes (each side scaled by exp2(its max - the larger max)).
        5. sm_acc (NW, HG * HEAD_DIM), sm_m, sm_l (NW, HG) in shared memory: group 0's lanes write
           their columns, lane 0 writes m and l; cuda.syncthreads(); then for i in range(tid, HG *
           HEAD_DIM, NW * WARP) merge the warps the same way: part_out[seq, h0 + hh, z, d] = o_d /
           total, and at d = 0 part_max = the largest max, part_sum = total."""
        raise NotImplementedError("Day 73: HG heads a block, next trip's loads in flight, G-lane dots, online softmax, "
                                  "fold, merge warps (126 lines)")

    return decode_attention_kernel


@cuda.jit(fastmath=True)
def merge_partitions_kernel(out, part_out, part_max, part_sum, context_lens, part_tokens):
    # out: (num_seqs, num_heads, head_dim); part_out: (num_seqs, num_heads, partitions, head_dim)
    # One block per (head, sequence), a thread per column: partition p's normalized output weighs in
    # with its exp-sum scaled to the common max, l_p 2^(m_p - M). Only the partitions that ran are read:
    # ceil(ctx / part_tokens) of them, (head_dim + 2) floats each -- a few MB against the cache's GB.
    h = cuda.blockIdx.x
    seq = cuda.blockIdx.y
    d = cuda.threadIdx.x
    n_parts = (context_lens[seq] + part_tokens - 1) // part_tokens
    m_all = part_max[seq, h, 0]  # the same address in every lane: one broadcast load per warp
    for p in range(1, n_parts):
        m_all = max(m_all, part_max[seq, h, p])
    total = float32(0.0)
    o_d = float32(0.0)
    for p in range(n_parts):
        w = part_sum[seq, h, p] * math.exp2(part_max[seq, h, p] - m_all)
        total += w
        o_d += part_out[seq, h, p, d] * w
    out[seq, h, d] = o_d / total


def cache_words(cache, word=np.uint64):
    """The cache as one flat run of words (8 bytes unless asked): free for a contiguous array (same
    memory), and the kernel then addresses every element with one offset instead of four indices."""
    return cache.reshape(cache.size).view(word)


_SIG = ("void(float32[:, :, ::1], float16[:, :, :, ::1], float16[:, :, :, ::1], int32[::1], float32, "
        "float32[:, :, ::1])")
_SIG_WORDS = ("void(float32[:, :, :, ::1], float32[:, :, ::1], float32[:, :, ::1], float32[:, :, ::1], "
              "uint64[::1], uint64[::1], int32[::1], float32, int32, int32, int32)")
_SIG_MERGE = ("void(float32[:, :, ::1], float32[:, :, :, ::1], float32[:, :, ::1], float32[:, :, ::1], int32[::1], "
              "int32)")
KERNELS = {
    "naive": (decode_naive_kernel, _SIG),
    "optimized": (decode_kernel(128, "float16", MAX_GROUP), _SIG_WORDS),  # the benchmark's shape: group 4
    "optimized.merge": (merge_partitions_kernel, _SIG_MERGE),
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
    seqs, heads, head_dim = query.shape
    _, max_len, kv_heads, _ = key_cache.shape
    hg = heads_per_block(heads, kv_heads, MAX_GROUP)
    kernel = decode_kernel(head_dim, np.dtype(key_cache.dtype).name, hg)
    # Partitions from max_len, which the host knows: reading context_lens back would stall the queue.
    part_tokens = min(PART_TOKENS, max_len) if PART_TOKENS > 0 else max_len
    parts = -(-max_len // part_tokens)
    part_out = launch.empty((seqs, heads, parts, head_dim), np.float32)
    part_max = launch.empty((seqs, heads, parts), np.float32)
    part_sum = launch.empty((seqs, heads, parts), np.float32)
    grid = (heads // hg, seqs, parts)  # head chunks fastest: a group's chunks share rows in L2
    kernel[grid, WARPS * WARP](part_out, part_max, part_sum, q, cache_words(kc), cache_words(vc), lens,
                               float32(scale * LOG2E), int32(kv_heads), int32(max_len), int32(part_tokens))
    if parts == 1:  # one partition is the whole context: its normalized output is the answer
        out = part_out.reshape(query.shape)
    else:
        out = launch.empty(query.shape, np.float32)
        merge_partitions_kernel[(heads, seqs), head_dim](out, part_out, part_max, part_sum, lens,
                                                         np.int32(part_tokens))
    return launch.result(out, query, key_cache, value_cache, context_lens)


def library(query, key_cache, value_cache, context_lens, scale):
    """The same attention in CuPy: masked scores, softmax, weighted sum (cuBLAS batched GEMMs)."""
    import cupy

    q, k, v = cupy.asarray(query), cupy.asarray(key_cache), cupy.asarray(value_cache)
    seqs, heads, head_dim = q.shape
    max_len, kv_heads = k.shape[1], k.shape[2]
    lens = cupy.asarray(context_lens)
    live = cupy.arange(max_len)[None, :] < lens[:, None]  # (num_seqs, max_len)
    k = cupy.where(live[:, :, None, None], k, 0).astype(cupy.float32).transpose(0, 2, 3, 1)
    v = cupy.where(live[:, :, None, None], v, 0).astype(cupy.float32).transpose(0, 2, 1, 3)
    qg = q.reshape(seqs, kv_heads, heads // kv_heads, head_dim) * scale
    scores = cupy.matmul(qg, k)  # (num_seqs, kv_heads, group, max_len)
    scores = cupy.where(live[:, None, None, :], scores, -cupy.inf)
    p = cupy.exp(scores - scores.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return cupy.matmul(p, v).reshape(seqs, heads, head_dim)
