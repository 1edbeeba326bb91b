"""Day 79 exercise: GQA and MQA in PagedAttention -- read each KV page once per group of query heads.

`group = num_heads // num_kv_heads` query heads share KV head h // group. Write ONE kernel that a
block runs for `heads_per_block` query heads of one group; the given host functions launch it twice:

naive      heads_per_block = 1: one block per query head, each re-reading its KV head's pages.
optimized  heads_per_block = MAX_GROUP: one block per KV head (per MAX_GROUP heads of its group),
           each K/V element loaded once and used for every head of the block.

Inputs, the reference and validation come from day 78 (solutions/day78_paged_attention_v1.py).
Grade with:  make check DAY=79
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

@cuda.jit
def paged_attention_gqa_kernel(out, query, key_cache, value_cache, block_tables, context_lens, scale,
                               heads_per_block):
    """Block (blockIdx.x, blockIdx.y = seq): chunks = ceil(group / heads_per_block) blocks per KV
    head, so kv_head = blockIdx.x // chunks and the block's first query head is
    head0 = kv_head * group + (blockIdx.x % chunks) * heads_per_block; it owns
    n_heads = min(heads_per_block, kv_head * group + group - head0) heads.

    Start from day 78's kernel and give every per-head quantity a leading MAX_GROUP axis: q, the
    accumulator, m, l and the logits s become cuda.local.array((MAX_GROUP, ...), float32), used only
    in constant loops guarded by g < n_heads. Load each K/V row element once per trip, then use it
    for all the block's heads. Merge warps per head through shared memory as on day 78.
    """
    raise NotImplementedError("Day 79: day 78's kernel with a loop over the block's heads around the "
                              "dot products, softmax and merge; K/V loaded once (70 lines)")

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
