"""Day 79: GQA and MQA in PagedAttention -- read each KV page once for all the query heads sharing it.

With grouped-query attention, `group = num_heads // num_kv_heads` query heads share one KV head
(Llama-3 8B: 32 over 8, group 4; MQA: all heads over one). Day 78's kernel gives every query head its
own block, so each KV page is fetched `group` times and each fp16 element is converted to fp32
`group` times. The shared kernel (solutions/paged_attention_common.py: day 78's kernel with `heads`
query heads of one KV head per block, a compile-time constant) launched twice is this day's two
versions; choosing the heads per block and the grid is what you write.

v1 naive      one block per (sequence, query head): heads = 1, every query head streams its KV
              head's pages again (day 78's schedule).
v2 optimized  one block per (sequence, KV head) holding up to MAX_GROUP heads of the group: each lane
              loads and converts a K/V element once and uses it for every head, keeping q, the
              running max, the exp-sum and the accumulator of each head in registers. A group larger
              than MAX_GROUP is split into equal chunks (the largest divisor <= MAX_GROUP).

Napkin math (64 seqs x 32 heads over 8 KV heads x 128, context 4096, fp16): the KV pages are 1.07 GB.
v1 asks the memory system for 4.3 GB (4 heads x 1.07 GB); the 60 MB L2 absorbs most of the repeats
because a group's four blocks run side by side, but L2 bandwidth, load instructions and fp16->fp32
conversions are all spent four times. v2 asks for 1.07 GB and does 4 FMAs per converted element
instead of 1. Registers are the price: q and the accumulators of four heads at 16 columns per lane
are 128 of them, so a lane keeps 2 rows in flight instead of 4 and prefetches the next trip instead.
"""

from course import launch
from solutions.day78_paged_attention_v1 import (  # noqa: F401  (the day's contract, shared with day 78)
    BENCH_SIZES,
    ERROR_FLOOR,
    HEAD_DIMS,
    MAX_HEAD_DIM,
    RTOL,
    VERSION_RTOL,
    WARP,
    Config,
    check_inputs,
    library,
    make_inputs,
    reference,
    traffic,
)
from solutions.paged_attention_common import SIG_PAGED, attention_kernel, launch_attention

TITLE = "GQA/MQA in PagedAttention"
MEMORY_SPACE = "global + registers"
VERSIONS = ("naive", "optimized")
BOUND = "memory"

MAX_GROUP = 4  # query heads per block; larger groups are split into chunks of this many

TEST_SIZES = (
    Config(2, 8, 2, 32, 16, 37, "float16"),  # GQA 4:1, contexts 37 (max), 1
    Config(4, 6, 2, 32, 8, 19, "float32"),  # GQA 3:1 (a partial chunk), contexts 19, 1, 8, 9
    Config(2, 4, 1, 64, 32, 45, "float16"),  # MQA, block 32, head_dim 64, contexts 45, 1
    Config(2, 8, 1, 32, 16, 17, "float32"),  # MQA with group 8: two chunks per KV head
)


KERNELS = {  # the benchmark's shape: group 4 in one block
    "naive": (attention_kernel(128, "float16", 16, 1), SIG_PAGED),
    "optimized": (attention_kernel(128, "float16", 16, MAX_GROUP), SIG_PAGED),
    # make inspect: four heads of a ragged row (80) and of the widest (256): still no spills in fp16
    "optimized.head80": (attention_kernel(80, "float16", 16, MAX_GROUP), SIG_PAGED),
    "optimized.head256": (attention_kernel(256, "float16", 16, MAX_GROUP), SIG_PAGED),
}


def heads_per_block(num_heads: int, num_kv_heads: int, limit: int) -> int:
    """The largest divisor of the group size (num_heads // num_kv_heads) up to ``limit``: the group's
    chunks are equal, so a block never straddles two KV heads (group 6 at limit 4: 3 + 3, not 4 + 2)."""
    # EXERCISE: the largest h <= limit that divides the group
    group = num_heads // num_kv_heads
    return max(h for h in range(1, min(group, limit) + 1) if group % h == 0)


def _launch(heads, query, key_cache, value_cache, block_tables, context_lens, scale):
    """The shared kernel with ``heads`` query heads of one KV head per block, on a grid of
    (num_heads // heads, num_seqs) blocks (a group's chunks side by side) and one page range spanning
    the table: its normalized partial output, (num_seqs, num_heads, 1, head_dim), is the answer."""
    part_out, _, _ = launch_attention(query, key_cache, value_cache, block_tables, context_lens, scale,
                                      heads=heads)
    return launch.result(part_out.reshape(query.shape), query, key_cache)


def naive(query, key_cache, value_cache, block_tables, context_lens, scale):
    """One block per query head: every head of a group streams the same pages again."""
    # EXERCISE: check the inputs, then _launch with one query head per block
    check_inputs(query, key_cache, value_cache, block_tables, context_lens, scale)
    return _launch(1, query, key_cache, value_cache, block_tables, context_lens, scale)


def optimized(query, key_cache, value_cache, block_tables, context_lens, scale):
    """One block per KV head (per chunk of up to MAX_GROUP heads of its group): each page read once."""
    # EXERCISE: check the inputs, heads_per_block(num_heads, num_kv_heads, MAX_GROUP), then _launch
    check_inputs(query, key_cache, value_cache, block_tables, context_lens, scale)
    heads = heads_per_block(query.shape[1], key_cache.shape[2], MAX_GROUP)
    return _launch(heads, query, key_cache, value_cache, block_tables, context_lens, scale)
