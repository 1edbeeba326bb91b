"""Day 81 exercise: PagedAttention v2 -- split long contexts into partitions, then reduce.

v1 (naive) gives each (sequence, head) one block over the whole context; with few, long sequences
that leaves most SMs idle. v2 (optimized) gives each (sequence, head, partition of partition_size
tokens) a block that writes a partial softmax -- normalized output o_p, max m_p, exp-sum l_p -- and a
reduce kernel merges them: out = sum_p o_p l_p 2^(m_p - M) / sum_p l_p 2^(m_p - M), M = max_p m_p.

Write the partition kernel (naive launches it with one partition, optimized with many) and the reduce
kernel. Inputs: day 78's six plus partition_size, a multiple of block_size.
Grade with:  make check DAY=81
"""

import functools
import math
from typing import NamedTuple

import numpy as np

from course import cuda, launch
from numba import float32, uint32, uint64  # noqa: F401  (uint32, uint64: for the kernel you write)
from solutions.day78_paged_attention_v1 import (  # the day's problem, inputs and checks are day 78's
    LOG2E,
    NO_LOGIT,  # noqa: F401  (for the kernel you write)
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
    # Constants for the kernel you write (unused until then).
    elem = np.dtype(cache_dtype).type  # noqa: F841
    PER_WORD, ROW_WORDS, G, WL, VEC = lane_layout(head_dim, np.dtype(cache_dtype).itemsize)
    NG = WARP // G  # noqa: F841
    KW = TOKENS * WL  # noqa: F841
    HEAD_DIM = head_dim  # noqa: F841

    @cuda.jit(fastmath=True)
    def paged_attention_partition_kernel(part_out, part_max, part_sum, query, key_words, value_words,
                                         block_tables, context_lens, scale, block_size, num_kv_heads,
                                         part_pages):
        """One block per (sequence, head, partition): blockIdx = (head, seq, part), NUM_WARPS warps.

        Day 78's optimized kernel (same lane layout, word loads first, shfl_xor dot products, base-2
        online softmax per group, shuffle fold, shared-memory merge of the warps) over pages
        first = part * part_pages up to last = min(first + part_pages, num_pages) of the sequence.
        - A partition with first >= num_pages has nothing to do: return before any barrier (the whole
          block leaves together). Count tokens to the context's end, never the partition's.
        - Write the partition's normalized output part_out[seq, head, part, d] = o_d / total, and from
          one thread its max part_max[seq, head, part] = M and exp-sum part_sum[seq, head, part] = total
          (both base 2). With a single partition, part_out is already the answer.
        """
        raise NotImplementedError("Day 81: day 78's kernel over pages [first, last) of the partition, "
                                  "writing o_p, m_p and l_p (85 lines)")

    return paged_attention_partition_kernel


@cuda.jit(fastmath=True)
def paged_attention_reduce_kernel(out, part_out, part_max, part_sum, context_lens, part_tokens):
    """One block per (sequence, head) (blockIdx = (head, seq)), one thread per column d.

    Only partitions p < ceil(context_lens[seq] / part_tokens) ran. M = max_p part_max[seq, head, p];
    w_p = part_sum[seq, head, p] * 2^(part_max[seq, head, p] - M) (subtract M: the maxima can be
    large); out[seq, head, d] = sum_p part_out[seq, head, p, d] * w_p / sum_p w_p.
    """
    raise NotImplementedError("Day 81: n_parts from context_lens[seq], M = max of part_max, "
                              "out = sum o_p l_p 2^(m_p - M) / sum l_p 2^(m_p - M) (12 lines)")


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
