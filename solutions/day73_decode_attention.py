"""Day 73: decode attention over a contiguous KV cache -- one new query token per sequence.

out[s, h] = softmax(scale * q[s, h] . K[s, :ctx, g]) @ V[s, :ctx, g], with g = h // (num_heads //
num_kv_heads) the KV head that query head h reads (GQA; MQA when num_kv_heads = 1).

v1 naive      one thread per (sequence, head) walks the tokens: a first pass for the softmax's max and
              sum, a second that recomputes each score and accumulates p * V into the output in global
              memory. 2048 threads for the bench, each reading whole rows alone: nothing coalesces and
              almost nothing is in flight.
v2 optimized  one block of 4 warps per (sequence, head). Lanes split head_dim (the query lives in
              registers, pre-scaled), warps split the tokens, four tokens a trip with all their K and V
              loads issued before any arithmetic; a warp-shuffle butterfly sums each dot product; an
              online softmax keeps one running max, sum and output row per warp in registers; the four
              warps merge their partial results through shared memory at the end.

Napkin math (bench: 64 sequences, 32 query heads over 8 KV heads, head_dim 128, context 4096, float16
cache): K and V hold 64 * 4096 * 8 * 128 * 2 B * 2 = 1.07 GB, read once per step; the FLOPs are
2 * 2 * 64 * 32 * 4096 * 128 = 4.3 GFLOP. 4 FLOP per byte, while the H200 can do ~12 FP32 FLOP per
byte it reads (51 TFLOP/s / 4.1 TB/s): decode is memory-bound. Floor: 1.07 GB / 4.1 TB/s = 262 us.
"""

import math

import numpy as np

from course import cuda, launch
from numba import float32

TITLE = "Decode attention over a contiguous cache"
MEMORY_SPACE = "shared + register"
VERSIONS = ("naive", "optimized")
# n = num_seqs, or (num_seqs, num_heads, num_kv_heads, head_dim, max_len, dtype).
TEST_SIZES = (1, 3, (2, 4, 1, 8, 5, "float32"), (1, 2, 2, 40, 33, "float16"), (2, 2, 1, 128, 9, "float16"))
BENCH_SIZES = ((64, 32, 8, 128, 4096, "float16"),)
BOUND = "memory"
RTOL = 5e-4  # float32 sums of exp-weighted rows over thousands of tokens
ERROR_FLOOR = 1e-2  # outputs average thousands of random rows towards zero (course.checking: the floor)
WARPS = 4
TOKENS_PER_TRIP = 4
MAX_HEAD_DIM = 128  # four elements per lane
NAIVE_THREADS = 64
FULL_MASK = 0xFFFFFFFF
# float32, not Python's float: a bare -math.inf makes Numba carry the whole softmax (max, exp, the
# running sums) in float64, several times slower on every GPU and far slower on most.
NEG_INF = np.float32(-math.inf)


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
    i = cuda.grid(1)
    heads = query.shape[1]
    if i >= query.shape[0] * heads:
        return
    s = i // heads
    h = i - s * heads
    g = h // (heads // key_cache.shape[2])
    head_dim = query.shape[2]
    ctx = context_lens[s]
    # Pass 1: max and sum of exp(score), online. Each thread reads its own K rows: lanes of a warp are
    # whole rows apart, and each has one load in flight.
    m = NEG_INF
    total = float32(0.0)
    for t in range(ctx):
        score = float32(0.0)
        for d in range(head_dim):
            score += query[s, h, d] * float32(key_cache[s, t, g, d])
        score *= scale
        m_new = max(m, score)
        total = total * math.exp(m - m_new) + math.exp(score - m_new)
        m = m_new
    # Pass 2: recompute each score, accumulate p * V straight into the output (global memory).
    for d in range(head_dim):
        out[s, h, d] = 0.0
    for t in range(ctx):
        score = float32(0.0)
        for d in range(head_dim):
            score += query[s, h, d] * float32(key_cache[s, t, g, d])
        p = math.exp(score * scale - m) / total
        for d in range(head_dim):
            out[s, h, d] += p * float32(value_cache[s, t, g, d])


# --- v2 ---------------------------------------------------------------------------------------------------

@cuda.jit(device=True, inline=True)
def _row(cache, s, t, g, lane, valid):
    # This lane's four elements (d = lane, lane + 32, lane + 64, lane + 96) of one head's row. A warp's
    # load of element d covers 32 consecutive elements: coalesced.
    head_dim = cache.shape[3]
    x0 = x1 = x2 = x3 = float32(0.0)
    if valid:
        if lane < head_dim:
            x0 = float32(cache[s, t, g, lane])
        if lane + 32 < head_dim:
            x1 = float32(cache[s, t, g, lane + 32])
        if lane + 64 < head_dim:
            x2 = float32(cache[s, t, g, lane + 64])
        if lane + 96 < head_dim:
            x3 = float32(cache[s, t, g, lane + 96])
    return x0, x1, x2, x3


@cuda.jit(device=True, inline=True)
def _row_q(query, s, h, lane, head_dim, scale):
    # The query row, four elements per lane like K and V, with the softmax scale folded in once.
    x0 = x1 = x2 = x3 = float32(0.0)
    if lane < head_dim:
        x0 = query[s, h, lane] * scale
    if lane + 32 < head_dim:
        x1 = query[s, h, lane + 32] * scale
    if lane + 64 < head_dim:
        x2 = query[s, h, lane + 64] * scale
    if lane + 96 < head_dim:
        x3 = query[s, h, lane + 96] * scale
    return x0, x1, x2, x3


@cuda.jit(device=True, inline=True)
def _warp_dot(q, k):
    # Butterfly: after five xor-shuffles every lane holds the full dot product; no shared memory,
    # no barrier, registers only.
    x = q[0] * k[0] + q[1] * k[1] + q[2] * k[2] + q[3] * k[3]
    x += cuda.shfl_xor_sync(FULL_MASK, x, 16)
    x += cuda.shfl_xor_sync(FULL_MASK, x, 8)
    x += cuda.shfl_xor_sync(FULL_MASK, x, 4)
    x += cuda.shfl_xor_sync(FULL_MASK, x, 2)
    x += cuda.shfl_xor_sync(FULL_MASK, x, 1)
    return x


@cuda.jit
def decode_attention_kernel(query, key_cache, value_cache, context_lens, scale, out):
    # query, out: (num_seqs, num_heads, head_dim); caches: (num_seqs, max_len, num_kv_heads, head_dim)
    # grid: (num_heads, num_seqs) -- the query heads sharing a KV head are neighbouring blocks, resident
    # together, so the L2 serves their repeated reads of that head; block: WARPS * 32 threads.
    h = cuda.blockIdx.x
    s = cuda.blockIdx.y
    lane = cuda.threadIdx.x & 31
    warp = cuda.threadIdx.x >> 5
    heads, head_dim = query.shape[1], query.shape[2]
    g = h // (heads // key_cache.shape[2])
    ctx = context_lens[s]

    # The query, pre-scaled, stays in registers for the whole context.
    q = _row_q(query, s, h, lane, head_dim, scale)
    m = NEG_INF  # running max of this warp's scores
    l = float32(0.0)  # running sum of exp(score - m)
    a0 = a1 = a2 = a3 = float32(0.0)  # running sum of exp(score - m) * V, this lane's four elements

    stride = WARPS * TOKENS_PER_TRIP
    t = warp
    while t < ctx:  # uniform per warp, so the shuffles below always see all 32 lanes
        t1, t2, t3 = t + WARPS, t + 2 * WARPS, t + 3 * WARPS
        # All eight rows' loads first: 4 tokens x (K + V) in flight per lane before any arithmetic.
        k0 = _row(key_cache, s, t, g, lane, True)
        k1 = _row(key_cache, s, t1, g, lane, t1 < ctx)
        k2 = _row(key_cache, s, t2, g, lane, t2 < ctx)
        k3 = _row(key_cache, s, t3, g, lane, t3 < ctx)
        v0 = _row(value_cache, s, t, g, lane, True)
        v1 = _row(value_cache, s, t1, g, lane, t1 < ctx)
        v2 = _row(value_cache, s, t2, g, lane, t2 < ctx)
        v3 = _row(value_cache, s, t3, g, lane, t3 < ctx)
        s0 = _warp_dot(q, k0)
        s1 = _warp_dot(q, k1) if t1 < ctx else NEG_INF  # a token past the context weighs exp(-inf) = 0
        s2 = _warp_dot(q, k2) if t2 < ctx else NEG_INF
        s3 = _warp_dot(q, k3) if t3 < ctx else NEG_INF
        # Online softmax: rescale what we have by exp(m_old - m_new) whenever the max grows.
        m_new = max(m, max(max(s0, s1), max(s2, s3)))  # finite: s0 is a real token
        corr = math.exp(m - m_new)
        p0, p1 = math.exp(s0 - m_new), math.exp(s1 - m_new)
        p2, p3 = math.exp(s2 - m_new), math.exp(s3 - m_new)
        l = l * corr + (p0 + p1) + (p2 + p3)
        a0 = a0 * corr + p0 * v0[0] + p1 * v1[0] + p2 * v2[0] + p3 * v3[0]
        a1 = a1 * corr + p0 * v0[1] + p1 * v1[1] + p2 * v2[1] + p3 * v3[1]
        a2 = a2 * corr + p0 * v0[2] + p1 * v1[2] + p2 * v2[2] + p3 * v3[2]
        a3 = a3 * corr + p0 * v0[3] + p1 * v1[3] + p2 * v2[3] + p3 * v3[3]
        m = m_new
        t += stride

    # Merge the warps: each leaves (max, sum, row) in shared memory; thread d combines column d.
    sm_max = cuda.shared.array(WARPS, float32)
    sm_sum = cuda.shared.array(WARPS, float32)
    sm_acc = cuda.shared.array((WARPS, MAX_HEAD_DIM), float32)  # (warp, d)
    if lane == 0:
        sm_max[warp] = m
        sm_sum[warp] = l
    sm_acc[warp, lane] = a0
    sm_acc[warp, lane + 32] = a1
    sm_acc[warp, lane + 64] = a2
    sm_acc[warp, lane + 96] = a3
    cuda.syncthreads()
    d = cuda.threadIdx.x
    if d < head_dim:
        m_all = sm_max[0]
        for w in range(1, WARPS):
            m_all = max(m_all, sm_max[w])
        total = float32(0.0)
        acc = float32(0.0)
        for w in range(WARPS):
            c = math.exp(sm_max[w] - m_all)  # a warp that saw no token has max -inf: weight 0
            total += sm_sum[w] * c
            acc += sm_acc[w, d] * c
        out[s, h, d] = acc / total


_SIG = ("void(float32[:, :, ::1], float16[:, :, :, ::1], float16[:, :, :, ::1], int32[::1], float32, "
        "float32[:, :, ::1])")
KERNELS = {"naive": (decode_naive_kernel, _SIG), "optimized": (decode_attention_kernel, _SIG)}


def _check(query, key_cache, value_cache, context_lens, scale):
    launch.check_array("query", query, dtype=np.float32, ndim=3)
    seqs, heads, head_dim = query.shape
    launch.check_array("key_cache", key_cache, dtype=(np.float16, np.float32), ndim=4)
    _, max_len, kv_heads, _ = key_cache.shape
    launch.check_array("key_cache", key_cache, shape=(seqs, None, None, head_dim))
    launch.check_array("value_cache", value_cache, dtype=key_cache.dtype, shape=key_cache.shape)
    launch.check_array("context_lens", context_lens, dtype=np.int32, shape=(seqs,))
    if not 1 <= head_dim <= MAX_HEAD_DIM:
        raise ValueError(f"head_dim: expected 1..{MAX_HEAD_DIM}, got {head_dim}")
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
    d_in = launch.to_device(query, key_cache, value_cache, context_lens)
    out = launch.empty(query.shape, np.float32)
    grid = (query.shape[1], query.shape[0])  # (num_heads, num_seqs)
    decode_attention_kernel[grid, WARPS * 32](*d_in, np.float32(scale), out)
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
