"""Day 79: GQA and MQA in PagedAttention -- read each KV page once for all the query heads sharing it.

MISTAKE: query heads are matched to KV heads by h % num_kv_heads (interleaved) instead of
h // group (contiguous groups, the convention of Llama, vLLM and PyTorch's enable_gqa).

With grouped-query attention, `group = num_heads // num_kv_heads` query heads share one KV head
(Llama-3 8B: 32 over 8, group 4; MQA: all heads over one). Day 78's kernel gives every query head its
own block, so each KV page is fetched `group` times. One kernel, two launches:

v1 naive      one block per (sequence, query head): heads_per_block = 1, every query head streams
              its KV head's pages again (the day-78 schedule).
v2 optimized  one block per (sequence, KV head, up to MAX_GROUP heads of its group): each lane loads a
              K/V element once and uses it for every head of the group, keeping q, the running max,
              the exp-sum and the accumulator of each head in registers.

Napkin math (64 seqs x 32 heads over 8 KV heads x 128, context 4096, fp16): the KV pages are 1.07 GB.
v1 asks the memory system for 4.3 GB (4 heads x 1.07 GB); how much of that the 60 MB L2 absorbs
depends on the four blocks of a group running side by side (the grid puts them next to each other).
v2 asks for 1.07 GB, issues a quarter of the load instructions, and does 4 FMAs per loaded element
instead of 1: the step from "hoping the L2 catches re-reads" to "never re-reading".
"""

import math

import numpy as np

from course import DEVICE, cuda, launch
from numba import float32
from solutions.day78_paged_attention_v1 import (  # noqa: F401  (the day's contract, shared with day 78)
    BENCH_SIZES,
    MAX_COLS,
    MAX_HEAD_DIM,
    WARP,
    Config,
    check_inputs,
    library,
    make_inputs,
    reference,
    traffic,
)

TITLE = "GQA/MQA in PagedAttention"
MEMORY_SPACE = "global + registers"
VERSIONS = ("naive", "optimized")
BOUND = "memory"

NUM_WARPS = 2 if DEVICE.kind == "sim" else 4  # 64 threads in the simulator, which pays per thread
TOKENS = 4  # rows of a page per trip, all loads issued before the shuffles
MAX_GROUP = 4  # query heads per block; larger groups are split into chunks of this many

TEST_SIZES = (
    Config(2, 8, 2, 32, 16, 37, "float16"),  # GQA 4:1, contexts 37 (max), 1
    Config(4, 6, 2, 32, 8, 19, "float32"),  # GQA 3:1 (a partial chunk), contexts 19, 1, 8, 9
    Config(2, 4, 1, 64, 32, 45, "float16"),  # MQA, block 32, head_dim 64, contexts 45, 1
    Config(2, 8, 1, 32, 16, 17, "float32"),  # MQA with group 8: two chunks per KV head
)


@cuda.jit
def paged_attention_gqa_kernel(out, query, key_cache, value_cache, block_tables, context_lens, scale,
                               heads_per_block):
    seq = cuda.blockIdx.y
    tid = cuda.threadIdx.x
    warp = tid // WARP
    lane = tid % WARP
    num_heads, head_dim = query.shape[1], query.shape[2]
    block_size, num_kv_heads = key_cache.shape[1], key_cache.shape[2]
    group = num_heads // num_kv_heads
    chunks = (group + heads_per_block - 1) // heads_per_block
    kv_head = cuda.blockIdx.x // chunks
    head0 = kv_head * group + (cuda.blockIdx.x % chunks) * heads_per_block
    n_heads = min(heads_per_block, kv_head * group + group - head0)  # this block's query heads
    cols = head_dim // WARP
    ctx = context_lens[seq]
    num_pages = (ctx + block_size - 1) // block_size

    # Per head g of the block: q, accumulator, running max and exp-sum, all in registers.
    q = cuda.local.array((MAX_GROUP, MAX_COLS), float32)
    acc = cuda.local.array((MAX_GROUP, MAX_COLS), float32)
    m = cuda.local.array(MAX_GROUP, float32)
    l = cuda.local.array(MAX_GROUP, float32)
    k = cuda.local.array((TOKENS, MAX_COLS), float32)
    v = cuda.local.array((TOKENS, MAX_COLS), float32)
    s = cuda.local.array((MAX_GROUP, TOKENS), float32)
    for g in range(MAX_GROUP):
        m[g] = -math.inf
        l[g] = 0.0
        for j in range(MAX_COLS):
            acc[g, j] = 0.0
            q[g, j] = 0.0
            if g < n_heads and j < cols:
                q[g, j] = query[seq, kv_head + num_kv_heads * (head0 - kv_head * group + g), lane + WARP * j] * scale

    for page in range(warp, num_pages, NUM_WARPS):
        block = block_tables[seq, page]
        n_tok = min(block_size, ctx - page * block_size)
        for t0 in range(0, n_tok, TOKENS):
            # One load per K/V element for the whole group: this is the saving over day 78.
            for u in range(TOKENS):
                live = t0 + u < n_tok
                for j in range(MAX_COLS):
                    k[u, j] = 0.0
                    v[u, j] = 0.0
                    if live and j < cols:
                        k[u, j] = float32(key_cache[block, t0 + u, kv_head, lane + WARP * j])
                        v[u, j] = float32(value_cache[block, t0 + u, kv_head, lane + WARP * j])
            for g in range(MAX_GROUP):
                for u in range(TOKENS):
                    part = float32(0.0)
                    for j in range(MAX_COLS):
                        part += q[g, j] * k[u, j]
                    s[g, u] = part
            for g in range(MAX_GROUP):
                for u in range(TOKENS):
                    s[g, u] += cuda.shfl_xor_sync(0xFFFFFFFF, s[g, u], 16)
                for u in range(TOKENS):
                    s[g, u] += cuda.shfl_xor_sync(0xFFFFFFFF, s[g, u], 8)
                for u in range(TOKENS):
                    s[g, u] += cuda.shfl_xor_sync(0xFFFFFFFF, s[g, u], 4)
                for u in range(TOKENS):
                    s[g, u] += cuda.shfl_xor_sync(0xFFFFFFFF, s[g, u], 2)
                for u in range(TOKENS):
                    s[g, u] += cuda.shfl_xor_sync(0xFFFFFFFF, s[g, u], 1)
            for g in range(MAX_GROUP):
                if g < n_heads:
                    m_new = m[g]
                    for u in range(TOKENS):
                        if t0 + u < n_tok:
                            m_new = max(m_new, s[g, u])
                    correction = math.exp(m[g] - m_new)
                    l[g] *= correction
                    for j in range(MAX_COLS):
                        acc[g, j] *= correction
                    for u in range(TOKENS):
                        if t0 + u < n_tok:
                            p = math.exp(s[g, u] - m_new)
                            l[g] += p
                            for j in range(MAX_COLS):
                                acc[g, j] += p * v[u, j]
                    m[g] = m_new

    # Merge the warps per head, as on day 78, through (NUM_WARPS, MAX_GROUP, head_dim) floats.
    sm_acc = cuda.shared.array((NUM_WARPS, MAX_GROUP, MAX_HEAD_DIM), float32)
    sm_m = cuda.shared.array((NUM_WARPS, MAX_GROUP), float32)
    sm_l = cuda.shared.array((NUM_WARPS, MAX_GROUP), float32)
    for g in range(MAX_GROUP):
        for j in range(MAX_COLS):
            if j < cols:
                sm_acc[warp, g, lane + WARP * j] = acc[g, j]
        if lane == 0:
            sm_m[warp, g] = m[g]
            sm_l[warp, g] = l[g]
    cuda.syncthreads()
    for i in range(tid, n_heads * head_dim, NUM_WARPS * WARP):
        g = i // head_dim
        d = i % head_dim
        m_all = sm_m[0, g]  # warp 0 always holds page 0
        for w in range(1, NUM_WARPS):
            m_all = max(m_all, sm_m[w, g])
        total = float32(0.0)
        o = float32(0.0)
        for w in range(NUM_WARPS):
            e = math.exp(sm_m[w, g] - m_all)
            total += sm_l[w, g] * e
            o += sm_acc[w, g, d] * e
        out[seq, kv_head + num_kv_heads * (head0 - kv_head * group + g), d] = o / total


_SIG = ("void(float32[:, :, ::1], float32[:, :, ::1], float16[:, :, :, ::1], float16[:, :, :, ::1], "
        "int32[:, ::1], int32[::1], float32, int64)")
KERNELS = {"naive": (paged_attention_gqa_kernel, _SIG), "optimized": (paged_attention_gqa_kernel, _SIG)}


def _launch(heads_per_block, query, key_cache, value_cache, block_tables, context_lens, scale):
    check_inputs(query, key_cache, value_cache, block_tables, context_lens, scale)
    args = launch.to_device(query, key_cache, value_cache, block_tables, context_lens)
    out = launch.empty(query.shape, np.float32)  # (num_seqs, num_heads, head_dim)
    num_seqs, num_heads = query.shape[:2]
    num_kv_heads = key_cache.shape[2]
    chunks = math.ceil(num_heads // num_kv_heads / heads_per_block)
    grid = (num_kv_heads * chunks, num_seqs)  # a group's chunks side by side
    paged_attention_gqa_kernel[grid, NUM_WARPS * WARP](out, *args, float32(scale), heads_per_block)
    return launch.result(out, query, key_cache)


def naive(query, key_cache, value_cache, block_tables, context_lens, scale):
    """One block per query head: every head of a group streams the same pages again."""
    return _launch(1, query, key_cache, value_cache, block_tables, context_lens, scale)


def optimized(query, key_cache, value_cache, block_tables, context_lens, scale):
    """One block per KV head (per MAX_GROUP heads of its group): each page read once."""
    return _launch(MAX_GROUP, query, key_cache, value_cache, block_tables, context_lens, scale)
