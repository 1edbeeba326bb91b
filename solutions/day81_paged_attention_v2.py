"""Day 81: PagedAttention v2 -- split long contexts into partitions, then reduce.

Day 79's launch gives each (sequence, KV head) one block that walks the whole context. With 64
sequences x 8 KV heads that is 512 blocks, about 4 per SM; with 4 sequences it is 32 blocks for 132
SMs, each walking 32k tokens alone: three quarters of the GPU idle and HBM starved. v2 cuts the
context into partitions of PARTITION_SIZE tokens, gives each (sequence, KV head, partition) its own
block, and merges the partial softmaxes in a second, tiny kernel. Both launch the shared kernel
(solutions/paged_attention_common.py: day 78's kernel with day 79's heads per block) whose blockIdx.z
selects pages [z * part_pages, (z + 1) * part_pages) and which writes each range's normalized output o_p,
max m_p and exp-sum l_p; the split, the launches and the reduce are what you write.

v1 naive      one partition spanning the whole block table: day 79's schedule, writing the output
              directly (a single partition's normalized output is the answer).
v2 optimized  partitions of 2048 tokens (128 pages at block 16): blocks = KV heads x seqs x partitions.
              Each block writes its normalized partial output o_p, max m_p and exp-sum l_p; the
              reduce kernel, one block per (sequence, head), computes
              out = sum_p o_p l_p 2^(m_p - M) / sum_p l_p 2^(m_p - M),  M = max_p m_p.

The partition size is part of the inputs (a launch parameter): tests use 1-4 pages so that tiny
contexts span several partitions; the benchmark uses 2048. It must be a multiple of the block size:
a partition is a whole number of pages.

Napkin math (4 seqs x 32 heads over 8 KV heads x 128, context 32768, block 16, fp16): K and V are
4 * 32768 * 8 * 128 * 2 B * 2 = 537 MB, ~0.13 ms at 4.1 TB/s. v1 runs 32 blocks of 4 warps: loads in
flight on 32 SMs and none on 100. v2 runs 512 blocks (16 partitions), ~4 per SM: two resident
(254 registers a thread, 4 warps a block) and a second wave, so a late block costs at most half a
wave, while each block walks 128 pages, long enough that its prologue (q into registers) and its
merge weigh little (day 89's sweep at 8 x 32k: 78 % of the copy rate at ~4 blocks per SM, 64-69 % at
16-31 with partitions of 512-1024 tokens). It adds 4 * 32 * 16 * (128 + 2) * 4 B = 1.1 MB of partial
results written and read once: < 1 % extra.
"""

import math
from typing import NamedTuple

import numpy as np

from course import cuda, launch
from numba import float32
from solutions.day78_paged_attention_v1 import Config as Day78Config
from solutions.day78_paged_attention_v1 import ERROR_FLOOR, HEAD_DIMS, RTOL, VERSION_RTOL  # noqa: F401  (graders read them)
from solutions.day78_paged_attention_v1 import check_inputs  # the day's problem, inputs and checks are day 78's
from solutions.day78_paged_attention_v1 import library as day78_library
from solutions.day78_paged_attention_v1 import make_inputs as day78_inputs
from solutions.day78_paged_attention_v1 import reference as day78_reference
from solutions.day78_paged_attention_v1 import traffic as day78_traffic
from solutions.day79_paged_attention_gqa import MAX_GROUP, heads_per_block
from solutions.paged_attention_common import SIG_PAGED, attention_kernel, launch_attention

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


# --- the partitions: the shared kernel over page ranges; then the reduce --------------------------


@cuda.jit(fastmath=True)
def paged_attention_reduce_kernel(out, part_out, part_max, part_sum, context_lens, part_tokens):
    """One block per (sequence, head) (blockIdx = (head, seq)), one thread per column d: rescale each
    partition's output by its share of the global exp-sum. Reads (partitions x (head_dim + 2)) floats.

    Only partitions p < ceil(context_lens[seq] / part_tokens) ran. M = max_p part_max[seq, head, p];
    w_p = part_sum[seq, head, p] * 2^(part_max[seq, head, p] - M) (subtract M: the maxima can be
    large); out[seq, head, d] = sum_p part_out[seq, head, p, d] * w_p / sum_p w_p.
    """
    # EXERCISE: n_parts from context_lens[seq], M = max of part_max, out = sum o_p l_p 2^(m_p - M) / sum l_p 2^(m_p - M)
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


_SIG_REDUCE = ("void(float32[:, :, ::1], float32[:, :, :, ::1], float32[:, :, ::1], float32[:, :, ::1], "
               "int32[::1], int32)")
KERNELS = {  # the benchmark's shape: a group of 4 heads per block, as day 79
    "naive": (attention_kernel(128, "float16", 16, MAX_GROUP), SIG_PAGED),
    "optimized": (attention_kernel(128, "float16", 16, MAX_GROUP), SIG_PAGED),
    "optimized.reduce": (paged_attention_reduce_kernel, _SIG_REDUCE),
}


def run_partitions(query, key_cache, value_cache, block_tables, context_lens, scale, part_pages):
    """The shared kernel with day 79's heads per block, each block over part_pages pages of its
    sequence (blockIdx.z the partition): returns (partial outputs, maxima, sums, context_lens).

    heads = heads_per_block(num_heads, num_kv_heads, MAX_GROUP); launch_attention(..., heads=heads,
    part_pages=part_pages) returns part_out (num_seqs, num_heads, partitions, head_dim), part_max and
    part_sum (num_seqs, num_heads, partitions); the reduce needs context_lens on the device too.
    """
    # EXERCISE: heads per block as day 79, launch_attention over part_pages pages, context_lens on the device
    heads = heads_per_block(query.shape[1], key_cache.shape[2], MAX_GROUP)
    part_out, part_max, part_sum = launch_attention(query, key_cache, value_cache, block_tables, context_lens,
                                                    scale, heads=heads, part_pages=part_pages)
    return part_out, part_max, part_sum, launch.to_device(context_lens)[0]


def naive(query, key_cache, value_cache, block_tables, context_lens, scale, partition_size):
    """v1: one partition covering the whole table, so one block per (sequence, KV head): its normalized
    output, part_out (num_seqs, num_heads, 1, head_dim), is the answer."""
    # EXERCISE: check_partitioned, run_partitions with one partition spanning the table, reshape
    check_partitioned(query, key_cache, value_cache, block_tables, context_lens, scale, partition_size)
    part_out, _, _, _ = run_partitions(query, key_cache, value_cache, block_tables, context_lens, scale,
                                    block_tables.shape[1])
    out = part_out.reshape(query.shape)  # (num_seqs, num_heads, 1, head_dim): already normalized
    return launch.result(out, query, key_cache)


def optimized(query, key_cache, value_cache, block_tables, context_lens, scale, partition_size):
    """v2: partitions of partition_size tokens (part_pages = partition_size // block_size), then the
    reduce kernel on a (num_heads, num_seqs) grid of head_dim threads into a fresh launch.empty output.

    The number of partitions launch_attention sizes its results by comes from the table's capacity
    (ceil(max_blocks_per_seq / part_pages)), not the longest context: the host never reads device
    context lengths back.
    """
    # EXERCISE: check_partitioned, run_partitions over partitions, then the reduce kernel
    check_partitioned(query, key_cache, value_cache, block_tables, context_lens, scale, partition_size)
    part_pages = partition_size // key_cache.shape[1]
    part_out, part_max, part_sum, lens = run_partitions(query, key_cache, value_cache, block_tables,
                                                     context_lens, scale, part_pages)
    num_seqs, num_heads, head_dim = query.shape
    out = launch.empty(query.shape, np.float32)  # (num_seqs, num_heads, head_dim)
    paged_attention_reduce_kernel[(num_heads, num_seqs), head_dim](out, part_out, part_max, part_sum, lens,
                                                                   np.int32(partition_size))
    return launch.result(out, query, key_cache)


def library(query, key_cache, value_cache, block_tables, context_lens, scale, partition_size):
    """PyTorch SDPA on a dense copy of the cache (day 78's library row)."""
    return day78_library(query, key_cache, value_cache, block_tables, context_lens, scale)
