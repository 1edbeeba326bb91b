"""Day 81 exercise: PagedAttention v2 -- split long contexts into partitions, then reduce.

v1 (naive) gives each (sequence, head) one block over the whole context; with few, long sequences
that leaves most SMs idle. v2 (optimized) gives each (sequence, head, partition of partition_size
tokens) a block that writes a partial softmax -- normalized output o_p, max m_p, exp-sum l_p -- and a
reduce kernel merges them: out = sum_p o_p l_p 2^(m_p - M) / sum_p l_p 2^(m_p - M), M = max_p m_p.

Day 78's kernel already takes a page range per block (blockIdx.z = partition): write run_partitions,
which launches it over partitions (naive: one, optimized: many), and the reduce kernel. Inputs: day
78's six plus partition_size, a multiple of block_size.
Grade with:  make check DAY=81
"""

import math  # noqa: F401  (for the code you write)
from typing import NamedTuple

import numpy as np

from course import cuda
from numba import float32  # noqa: F401  (for the kernel you write)
from solutions.day78_paged_attention_v1 import (  # the day's problem, inputs, checks and kernel are day 78's
    SIG_PAGED,
    attention_kernel,
    check_inputs,
    heads_per_block,  # noqa: F401  (for the code you write)
    launch_attention,  # noqa: F401  (for the code you write)
)
from solutions.day78_paged_attention_v1 import Config as Day78Config
from solutions.day78_paged_attention_v1 import library as day78_library
from solutions.day78_paged_attention_v1 import make_inputs as day78_inputs
from solutions.day78_paged_attention_v1 import reference as day78_reference
from solutions.day78_paged_attention_v1 import traffic as day78_traffic
from solutions.day79_paged_attention_gqa import MAX_GROUP

TITLE = "PagedAttention v2"
MEMORY_SPACE = "global + shared"
VERSIONS = ("naive", "optimized")
BOUND = "memory"

PARTITION_SIZE = 2048  # tokens per partition: 128 pages of 16, ~4 blocks per SM at the benchmark's shape


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


@cuda.jit(fastmath=True)
def paged_attention_reduce_kernel(out, part_out, part_max, part_sum, context_lens, part_tokens):
    """One block per (sequence, head) (blockIdx = (head, seq)), one thread per column d.

    Only partitions p < ceil(context_lens[seq] / part_tokens) ran. M = max_p part_max[seq, head, p];
    w_p = part_sum[seq, head, p] * 2^(part_max[seq, head, p] - M) (subtract M: the maxima can be
    large); out[seq, head, d] = sum_p part_out[seq, head, p, d] * w_p / sum_p w_p.
    """
    raise NotImplementedError("Day 81: n_parts from context_lens[seq], M = max of part_max, "
                              "out = sum o_p l_p 2^(m_p - M) / sum l_p 2^(m_p - M) (12 lines)")


_SIG_REDUCE = ("void(float32[:, :, ::1], float32[:, :, :, ::1], float32[:, :, ::1], float32[:, :, ::1], "
               "int32[::1], int32)")
KERNELS = {  # the benchmark's shape: a group of 4 heads per block, as day 79
    "naive": (attention_kernel(128, "float16", 16, MAX_GROUP), SIG_PAGED),
    "optimized": (attention_kernel(128, "float16", 16, MAX_GROUP), SIG_PAGED),
    "optimized.reduce": (paged_attention_reduce_kernel, _SIG_REDUCE),
}


def naive(query, key_cache, value_cache, block_tables, context_lens, scale, partition_size):
    """v1: one partition covering the whole block table, so one block per (sequence, KV head).

    check_partitioned first; heads = heads_per_block(num_heads, num_kv_heads, MAX_GROUP) as day 79;
    launch_attention(..., heads=heads, part_pages=max_blocks_per_seq) returns (part_out, part_max,
    part_sum) with part_out (num_seqs, num_heads, 1, head_dim): one normalized partition is the answer.
    Return launch.result(part_out reshaped to query's shape, query, key_cache).
    """
    raise NotImplementedError("Day 81: check, heads per block, launch_attention with one partition, "
                              "reshape (5 lines)")


def optimized(query, key_cache, value_cache, block_tables, context_lens, scale, partition_size):
    """v2: partitions of partition_size tokens (part_pages = partition_size // block_size), then the
    reduce kernel on a (num_heads, num_seqs) grid of head_dim threads into a fresh launch.empty output.

    The number of partitions launch_attention sizes its results by comes from the table's capacity
    (ceil(max_blocks_per_seq / part_pages)), not the longest context: the host never reads device
    context lengths back. The reduce needs context_lens on the device (launch.to_device).
    """
    raise NotImplementedError("Day 81: check, launch_attention over partitions, then the reduce kernel "
                              "(10 lines)")


def library(query, key_cache, value_cache, block_tables, context_lens, scale, partition_size):
    """PyTorch SDPA on a dense copy of the cache (day 78's library row)."""
    return day78_library(query, key_cache, value_cache, block_tables, context_lens, scale)
