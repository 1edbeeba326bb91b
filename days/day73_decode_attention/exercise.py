"""Day 73 exercise: decode attention over a contiguous KV cache.

out[s, h] = softmax(scale * q[s, h] . K[s, :ctx, g]) @ V[s, :ctx, g], g = h // (num_heads // num_kv_heads).
Rows of the cache past a sequence's context hold garbage (NaN in the tests): never let them in.
Write the naive kernel, then the helpers and the optimized kernel; host functions are given.
Grade with:  make check DAY=73
"""

import math  # noqa: F401  (math.exp and math.inf, in the kernels you write)

import numpy as np

from course import cuda, launch
from numba import float32

TITLE = "Decode attention over a contiguous cache"
MEMORY_SPACE = "shared + register"
VERSIONS = ("naive", "optimized")
BOUND = "memory"
WARPS = 4
TOKENS_PER_TRIP = 4
MAX_HEAD_DIM = 128  # four elements per lane
NAIVE_THREADS = 64
FULL_MASK = 0xFFFFFFFF


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

@cuda.jit(device=True, inline=True)
def _row(cache, s, t, g, lane, valid):
    # This lane's four elements (d = lane, lane + 32, lane + 64, lane + 96) of one head's row. A warp's
    # load of element d covers 32 consecutive elements: coalesced.
    raise NotImplementedError("Day 73: return four float32 values: cache[s, t, g, lane + 32 * j] for j = "
                              "0..3 when valid and that index is < head_dim, else 0 (12 lines)")


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
    raise NotImplementedError("Day 73: this lane's four products summed, then five cuda.shfl_xor_sync "
                              "steps with offsets 16, 8, 4, 2, 1 (7 lines)")


@cuda.jit
def decode_attention_kernel(query, key_cache, value_cache, context_lens, scale, out):
    # query, out: (num_seqs, num_heads, head_dim); caches: (num_seqs, max_len, num_kv_heads, head_dim)
    # grid: (num_heads, num_seqs) -- the query heads sharing a KV head are neighbouring blocks, resident
    # together, so the L2 serves their repeated reads of that head; block: WARPS * 32 threads.
    """One block of WARPS * 32 threads per (head h = blockIdx.x, sequence s = blockIdx.y).
    1. q = _row_q(...): the scaled query, four elements per lane, in registers.
    2. Warp w takes tokens w, w + WARPS, w + 2 * WARPS, w + 3 * WARPS, then steps by WARPS * 4:
    load all four K rows and four V rows with _row (valid = token < ctx), score each with _warp_dot
    (-inf for a token past the context), and update the running max m, sum l and row a0..a3:
    corr = exp(m - m_new); l = l * corr + sum of p; a_j = a_j * corr + sum of p * v_j.
    3. Lane 0 writes m, l to sm_max[w], sm_sum[w]; every lane its a_j to sm_acc[w, lane + 32 * j];
    cuda.syncthreads(); thread d < head_dim rescales each warp by exp(sm_max[w] - max) and writes
    out[s, h, d] = acc / total."""
    raise NotImplementedError("Day 73: per warp an online softmax over tokens warp, warp + 4, ..., four a "
                              "trip; then sm_max, sm_sum, sm_acc in shared memory, syncthreads, thread d "
                              "merges the warps (50 lines)")


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


