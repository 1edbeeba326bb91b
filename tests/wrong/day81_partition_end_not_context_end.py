"""Day 81: PagedAttention v2 -- split long contexts into partitions, then reduce.

MISTAKE: tokens are counted to the partition's end, not the context's: the last partition's
last page is read whole, past context_lens[s], so stale or garbage rows join its softmax.

Day 78's kernel gives each (sequence, head) one block that walks the whole context. With 64
sequences x 32 heads that is 2048 blocks, 15 per SM; with 4 sequences x 32 heads it is 128 blocks for
132 SMs, each walking 32k tokens alone: the GPU is a quarter full and HBM idles. v2 cuts the context
into partitions of PARTITION_SIZE tokens, gives each (sequence, head, partition) its own block, and
merges the partial softmaxes in a second, tiny kernel.

v1 naive      the partition kernel launched with one partition spanning the whole block table: day
              78's schedule, one block per (sequence, head), writing the output directly.
v2 optimized  partitions of 512 tokens (32 pages at block 16): blocks = heads x seqs x partitions.
              Each block writes its normalized partial output o_p, max m_p and exp-sum l_p; the
              reduce kernel, one block per (sequence, head), computes
              out = sum_p o_p l_p 2^(m_p - M) / sum_p l_p 2^(m_p - M),  M = max_p m_p.

The partition size is part of the inputs (a launch parameter): tests use 1-4 pages so that tiny
contexts span several partitions; the benchmark uses 512. It must be a multiple of the block size:
a partition is a whole number of pages.

Napkin math (4 seqs x 32 heads over 8 KV heads x 128, context 32768, block 16, fp16): K and V are
4 * 32768 * 8 * 128 * 2 B * 2 = 537 MB, ~0.13 ms at 4.1 TB/s. v1 runs 128 blocks of 4 warps: 16
warps' worth of loads in flight on 128 SMs and none on 4. v2 runs 8192 blocks (64 partitions) and
adds 4 * 32 * 64 * (128 + 2) * 4 B = 4.3 MB of partial results written and read once: < 1 % extra.
"""

import functools
import math
from typing import NamedTuple

import numpy as np

from course import cuda, launch
from numba import float32, uint32, uint64
from solutions.day78_paged_attention_v1 import (  # the day's problem, inputs and checks are day 78's
    LOG2E,
    NO_LOGIT,
    NUM_WARPS,
    TOKENS,
    WARP,
    cache_words,
    check_inputs,
    lane_layout,
)
from solutions.day78_paged_attention_v1 import Config as Day78Config
from solutions.day78_paged_attention_v1 import library as day78_library
from solutions.day78_paged_attention_v1 import make_inputs as day78_inputs
from solutions.day78_paged_attention_v1 import reference as day78_reference
from solutions.day78_paged_attention_v1 import traffic as day78_traffic

TITLE = "PagedAttention v2"
MEMORY_SPACE = "global + shared"
VERSIONS = ("naive", "optimized")
BOUND = "memory"

PARTITION_SIZE = 512  # tokens per partition (vLLM's default): 32 pages of 16


class Config(NamedTuple):
    """Day 78's problem plus the partition size the optimized version splits contexts into."""

    num_seqs: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    block_size: int
    context: int
    cache_dtype: str = "float16"
    ragged: bool = True
    partition_size: int = PARTITION_SIZE


TEST_SIZES = (
    Config(4, 4, 2, 32, 8, 37, "float32", partition_size=16),  # contexts 37 (3 partitions), 1, 8, 9
    Config(2, 8, 2, 32, 16, 40, "float16", partition_size=16),  # GQA 4:1, one page per partition
    Config(3, 2, 1, 64, 32, 70, "float16", partition_size=32),  # MQA, block 32: 70 = 3 partitions
    Config(2, 2, 2, 32, 8, 17, "float32", partition_size=8),  # 17 tokens: 3 one-page partitions
)
BENCH_SIZES = (Config(4, 32, 8, 128, 16, 32768, "float16", ragged=False),)


def make_inputs(cfg, seed=0):
    """(query, key_cache, value_cache, block_tables, context_lens, scale, partition_size)."""
    cfg = Config(*cfg)
    return (*day78_inputs(Day78Config(*cfg[:8]), seed), cfg.partition_size)


def reference(query, key_cache, value_cache, block_tables, context_lens, scale, partition_size):
    """Day 78's plain reference: partitioning must not change the answer."""
    return day78_reference(query, key_cache, value_cache, block_tables, context_lens, scale)


def traffic(query, key_cache, value_cache, block_tables, context_lens, scale, partition_size):
    """Day 78's minimum (the partial results are v2's own overhead, not part of the problem)."""
    return day78_traffic(query, key_cache, value_cache, block_tables, context_lens, scale)


def check_partitioned(query, key_cache, value_cache, block_tables, context_lens, scale, partition_size):
    check_inputs(query, key_cache, value_cache, block_tables, context_lens, scale)
    block_size = key_cache.shape[1]
    if not isinstance(partition_size, (int, np.integer)) or partition_size < block_size \
            or partition_size % block_size:
        raise ValueError(f"partition_size: expected a positive multiple of block_size ({block_size}), "
                         f"got {partition_size!r}")


# --- the partition kernel: day 78's kernel over a page range, writing a partial softmax -----------


@functools.cache
def partition_kernel(head_dim: int, cache_dtype: str):
    """Day 78's optimized kernel (same lane layout, loads first, base-2 online softmax) over pages
    [part * part_pages, (part + 1) * part_pages) of the context, part = blockIdx.z. It writes the
    partition's normalized output o_p with its max m_p and exp-sum l_p (base 2)."""
    elem = np.dtype(cache_dtype).type
    PER_WORD, ROW_WORDS, G, WL, VEC = lane_layout(head_dim, np.dtype(cache_dtype).itemsize)
    NG = WARP // G
    KW = TOKENS * WL
    HEAD_DIM = head_dim

    @cuda.jit(fastmath=True)
    def paged_attention_partition_kernel(part_out, part_max, part_sum, query, key_words, value_words,
                                         block_tables, context_lens, scale, block_size, num_kv_heads,
                                         part_pages):
        seq = cuda.blockIdx.y
        head = cuda.blockIdx.x
        part = cuda.blockIdx.z
        tid = cuda.threadIdx.x
        warp = tid // WARP
        lane = tid % WARP
        grp = lane // G
        gl = lane % G
        ctx = context_lens[seq]
        num_pages = (ctx + block_size - 1) // block_size
        first = part * part_pages
        if first >= num_pages:
            return  # a partition past this sequence's context: the whole block leaves, no barrier
        last = min(first + part_pages, num_pages)  # never a table entry past the context
        kv_head = head // (query.shape[1] // num_kv_heads)
        row_words = uint32(num_kv_heads * ROW_WORDS)
        page_words = uint64(block_size) * uint64(row_words)
        lane_words = uint64(kv_head * ROW_WORDS + gl * WL)

        q = cuda.local.array(VEC, float32)
        acc = cuda.local.array(VEC, float32)
        kbuf = cuda.local.array(KW, uint32)
        vbuf = cuda.local.array(KW, uint32)
        k = kbuf.view(elem)
        v = vbuf.view(elem)
        s = cuda.local.array(TOKENS, float32)
        for e in range(VEC):
            q[e] = query[seq, head, gl * VEC + e] * scale
            acc[e] = 0.0
        m = float32(NO_LOGIT)
        l = float32(0.0)

        for page in range(first + warp, last, NUM_WARPS):
            base = uint64(block_tables[seq, page]) * page_words + lane_words
            n_tok = min(block_size, (first + part_pages) * block_size - page * block_size)
            for t0 in range(0, n_tok, NG * TOKENS):
                for u in range(TOKENS):
                    row = min(t0 + u * NG + grp, n_tok - 1)
                    off = base + uint64(uint32(row) * row_words)
                    for w in range(WL):
                        kbuf[u * WL + w] = key_words[off + uint64(w)]
                        vbuf[u * WL + w] = value_words[off + uint64(w)]
                for u in range(TOKENS):
                    dot = float32(0.0)
                    for e in range(VEC):
                        dot += q[e] * float32(k[u * VEC + e])
                    s[u] = dot
                o = G // 2
                while o > 0:
                    for u in range(TOKENS):
                        s[u] += cuda.shfl_xor_sync(0xFFFFFFFF, s[u], o)
                    o //= 2
                m_new = m
                for u in range(TOKENS):
                    if t0 + u * NG + grp >= n_tok:
                        s[u] = -math.inf
                    m_new = max(m_new, s[u])
                correction = math.exp2(m - m_new)
                l *= correction
                for e in range(VEC):
                    acc[e] *= correction
                for u in range(TOKENS):
                    p = math.exp2(s[u] - m_new)
                    l += p
                    for e in range(VEC):
                        acc[e] += p * float32(v[u * VEC + e])
                m = m_new

        o = G
        while o < WARP:
            m_o = cuda.shfl_xor_sync(0xFFFFFFFF, m, o)
            l_o = cuda.shfl_xor_sync(0xFFFFFFFF, l, o)
            m_new = max(m, m_o)
            a = math.exp2(m - m_new)
            b = math.exp2(m_o - m_new)
            l = l * a + l_o * b
            for e in range(VEC):
                acc[e] = acc[e] * a + cuda.shfl_xor_sync(0xFFFFFFFF, acc[e], o) * b
            m = m_new
            o *= 2

        sm_acc = cuda.shared.array((NUM_WARPS, HEAD_DIM), float32)
        sm_m = cuda.shared.array(NUM_WARPS, float32)
        sm_l = cuda.shared.array(NUM_WARPS, float32)
        if grp == 0:
            for e in range(VEC):
                sm_acc[warp, gl * VEC + e] = acc[e]
        if lane == 0:
            sm_m[warp] = m
            sm_l[warp] = l
        cuda.syncthreads()
        m_all = sm_m[0]
        for w in range(1, NUM_WARPS):
            m_all = max(m_all, sm_m[w])
        total = float32(0.0)
        for w in range(NUM_WARPS):
            total += sm_l[w] * math.exp2(sm_m[w] - m_all)
        for d in range(tid, HEAD_DIM, NUM_WARPS * WARP):
            o_d = float32(0.0)
            for w in range(NUM_WARPS):
                o_d += sm_acc[w, d] * math.exp2(sm_m[w] - m_all)
            part_out[seq, head, part, d] = o_d / total  # normalized: with one partition, the answer
        if tid == 0:
            part_max[seq, head, part] = m_all
            part_sum[seq, head, part] = total

    return paged_attention_partition_kernel


@cuda.jit(fastmath=True)
def paged_attention_reduce_kernel(out, part_out, part_max, part_sum, context_lens, part_tokens):
    """One block per (sequence, head), one thread per column: rescale each partition's output by its
    share of the global exp-sum. Reads (partitions x (head_dim + 2)) floats: a few KB."""
    seq = cuda.blockIdx.y
    head = cuda.blockIdx.x
    d = cuda.threadIdx.x
    n_parts = (context_lens[seq] + part_tokens - 1) // part_tokens  # only partitions that ran
    # Every thread reads the same m_p and l_p: one broadcast transaction per warp.
    m_all = part_max[seq, head, 0]
    for p in range(1, n_parts):
        m_all = max(m_all, part_max[seq, head, p])
    total = float32(0.0)
    o_d = float32(0.0)
    for p in range(n_parts):
        w = part_sum[seq, head, p] * math.exp2(part_max[seq, head, p] - m_all)
        total += w
        o_d += part_out[seq, head, p, d] * w
    out[seq, head, d] = o_d / total


_SIG = ("void(float32[:, :, :, ::1], float32[:, :, ::1], float32[:, :, ::1], float32[:, :, ::1], "
        "uint32[::1], uint32[::1], int32[:, ::1], int32[::1], float32, int32, int32, int32)")
_SIG_REDUCE = ("void(float32[:, :, ::1], float32[:, :, :, ::1], float32[:, :, ::1], float32[:, :, ::1], "
               "int32[::1], int32)")
KERNELS = {  # the benchmark's head_dim and dtype
    "naive": (partition_kernel(128, "float16"), _SIG),
    "optimized": (partition_kernel(128, "float16"), _SIG),
    "optimized.reduce": (paged_attention_reduce_kernel, _SIG_REDUCE),
}


def run_partitions(query, key_cache, value_cache, block_tables, context_lens, scale, part_pages):
    """Launch the partition kernel; returns (out or partial outputs, maxima, sums, partitions)."""
    q, kc, vc, tables, lens = launch.to_device(query, key_cache, value_cache, block_tables, context_lens)
    num_seqs, num_heads, head_dim = query.shape
    n_parts = math.ceil(block_tables.shape[1] / part_pages)  # the table's capacity bounds every context
    part_out = launch.empty((num_seqs, num_heads, n_parts, head_dim), np.float32)
    part_max = launch.empty((num_seqs, num_heads, n_parts), np.float32)
    part_sum = launch.empty((num_seqs, num_heads, n_parts), np.float32)
    kernel = partition_kernel(head_dim, np.dtype(key_cache.dtype).name)
    grid = (num_heads, num_seqs, n_parts)  # heads fastest: a group's heads share pages in L2
    kernel[grid, NUM_WARPS * WARP](part_out, part_max, part_sum, q, cache_words(kc), cache_words(vc), tables,
                                   lens, float32(scale * LOG2E), key_cache.shape[1], key_cache.shape[2],
                                   part_pages)
    return part_out, part_max, part_sum, lens


def naive(query, key_cache, value_cache, block_tables, context_lens, scale, partition_size):
    """v1: one partition covering the whole table, so one block per (sequence, head)."""
    check_partitioned(query, key_cache, value_cache, block_tables, context_lens, scale, partition_size)
    part_out, _, _, _ = run_partitions(query, key_cache, value_cache, block_tables, context_lens, scale,
                                    block_tables.shape[1])
    out = part_out.reshape(query.shape)  # (num_seqs, num_heads, 1, head_dim): already normalized
    return launch.result(out, query, key_cache)


def optimized(query, key_cache, value_cache, block_tables, context_lens, scale, partition_size):
    """v2: partitions of partition_size tokens, then the reduce kernel."""
    check_partitioned(query, key_cache, value_cache, block_tables, context_lens, scale, partition_size)
    part_pages = partition_size // key_cache.shape[1]
    part_out, part_max, part_sum, lens = run_partitions(query, key_cache, value_cache, block_tables,
                                                     context_lens, scale, part_pages)
    num_seqs, num_heads, head_dim = query.shape
    out = launch.empty(query.shape, np.float32)  # (num_seqs, num_heads, head_dim)
    paged_attention_reduce_kernel[(num_heads, num_seqs), head_dim](out, part_out, part_max, part_sum, lens,
                                                                   partition_size)
    return launch.result(out, query, key_cache)


def library(query, key_cache, value_cache, block_tables, context_lens, scale, partition_size):
    """PyTorch SDPA on a dense copy of the cache (day 78's library row)."""
    return day78_library(query, key_cache, value_cache, block_tables, context_lens, scale)
