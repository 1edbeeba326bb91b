"""Day 78 exercise: PagedAttention v1 -- one decode step of attention over a paged KV cache.

For each sequence s and query head h (KV head g = h // (num_heads // num_kv_heads)):

    out[s, h] = softmax(scale * q[s, h] . K[s, g, :ctx]) @ V[s, g, :ctx]

Token t of sequence s lives in physical block block_tables[s, t // block_size], row t % block_size.
Slots past context_lens[s] hold garbage (NaN in the tests): never read them.

Write the two kernels; validation and launches are given (inputs and the reference live in
solutions/day78_paged_attention_v1.py).
Grade with:  make check DAY=78
"""

import math

import numpy as np

from course import DEVICE, cuda, launch
from numba import float32

TITLE = "PagedAttention v1"
MEMORY_SPACE = "global + shared"
VERSIONS = ("naive", "optimized")
BOUND = "memory"

WARP = 32
# optimized: 128 threads per (sequence, head) block; 64 in the simulator, which pays per thread
NUM_WARPS = 2 if DEVICE.kind == "sim" else 4
TOKENS = 4  # optimized: tokens of a page handled per trip, all loads issued before any reduction
MAX_HEAD_DIM = 128  # head_dim / 32 columns per lane live in registers, so the bound is fixed
MAX_COLS = MAX_HEAD_DIM // WARP
NAIVE_THREADS = 64


# --- validation (shared by days 79-81) ----------------------------------------------------------


def check_inputs(query, key_cache, value_cache, block_tables, context_lens, scale, *, max_head_dim=None):
    """ValueError, before any launch, unless the six inputs describe a valid decode step.

    Shapes and dtypes are always checked. The contents of block_tables and context_lens are checked
    when they are NumPy arrays; device arrays are trusted (reading them back would stall the launch
    queue; serving engines trust the scheduler's metadata the same way).
    """
    launch.check_array("query", query, dtype=np.float32, ndim=3)
    launch.check_array("key_cache", key_cache, dtype=(np.float32, np.float16), ndim=4)
    launch.check_array("value_cache", value_cache, dtype=key_cache.dtype, shape=key_cache.shape)
    num_seqs, num_heads, head_dim = query.shape
    num_blocks, block_size, num_kv_heads, cache_dim = key_cache.shape
    if cache_dim != head_dim:
        raise ValueError(f"key_cache: expected head_dim {head_dim} (from query), got {cache_dim}")
    if num_kv_heads < 1 or num_heads % num_kv_heads:
        raise ValueError(f"num_heads ({num_heads}) must be a multiple of num_kv_heads ({num_kv_heads})")
    limit = max_head_dim or MAX_HEAD_DIM
    if head_dim % WARP or not 0 < head_dim <= limit:
        raise ValueError(f"head_dim must be a multiple of {WARP} up to {limit}, got {head_dim}")
    launch.check_array("block_tables", block_tables, dtype=np.int32, ndim=2)
    if block_tables.shape[0] != num_seqs:
        raise ValueError(f"block_tables: expected {num_seqs} rows (one per sequence), "
                         f"got shape {tuple(block_tables.shape)}")
    launch.check_array("context_lens", context_lens, dtype=np.int32, shape=(num_seqs,))
    if not isinstance(scale, (int, float, np.floating)) or not math.isfinite(scale):
        raise ValueError(f"scale: expected a finite number, got {scale!r}")
    if isinstance(context_lens, np.ndarray):
        capacity = block_tables.shape[1] * block_size
        bad = np.flatnonzero((context_lens < 1) | (context_lens > capacity))
        if bad.size:
            s = int(bad[0])
            raise ValueError(f"context_lens[{s}] = {int(context_lens[s])}: expected 1..{capacity} "
                             f"(block_tables has {block_tables.shape[1]} blocks of {block_size})")
        if isinstance(block_tables, np.ndarray):
            for s in range(num_seqs):
                used = block_tables[s, :math.ceil(int(context_lens[s]) / block_size)]
                out = np.flatnonzero((used < 0) | (used >= num_blocks))
                if out.size:
                    i = int(out[0])
                    raise ValueError(f"block_tables[{s}, {i}] = {int(used[i])}: not a block of the cache "
                                     f"(0..{num_blocks - 1})")


# --- v1 naive: one thread per (sequence, head) ----------------------------------------------------


@cuda.jit
def paged_attention_naive_kernel(out, query, key_cache, value_cache, block_tables, context_lens, scale):
    """One thread per (sequence, head): i = cuda.grid(1) -> seq = i // num_heads, head = i % num_heads.

    Walk the tokens t = 0 .. ctx-1 through the block table (block = block_tables[seq, t // block_size],
    row t % block_size). Three passes: (1) the largest logit m = max_t scale * q.k_t; (2) zero the
    output row, then for each token p = exp(logit - m), total += p, out[seq, head, :] += p * v_t;
    (3) divide the row by total. Convert cache elements with float32(...): the cache may be float16.
    """
    raise NotImplementedError("Day 78: guard i < num_seqs * num_heads, then three loops over the "
                              "tokens through the block table (25 lines)")



# --- v2 optimized: one block per (sequence, head), warps over pages --------------------------------


@cuda.jit
def paged_attention_v1_kernel(out, query, key_cache, value_cache, block_tables, context_lens, scale):
    """One block per (sequence, head): blockIdx.y = seq, blockIdx.x = head, NUM_WARPS warps of 32.

    - Lane `lane` owns columns d = lane + 32 * j, j < head_dim // 32: keep q * scale and the output
      accumulator for them in cuda.local.array(MAX_COLS, float32) indexed only by constant loops.
    - Warp w takes pages w, w + NUM_WARPS, ...; a page holds n_tok = min(block_size, ctx - page *
      block_size) live rows. For TOKENS rows at a time: load K and V first (skip dead rows: they
      may be NaN), partial dot products, then a butterfly sum with cuda.shfl_xor_sync(0xFFFFFFFF,
      x, offset) for offset 16, 8, 4, 2, 1.
    - Online softmax per warp: running max m (start at -inf) and exp-sum l; when the max grows,
      rescale l and the accumulators by exp(m_old - m_new) before adding exp(s - m_new) * v.
    - Merge the warps through cuda.shared.array((NUM_WARPS, MAX_HEAD_DIM), float32) plus their m and
      l, cuda.syncthreads(), then out[d] = sum_w acc_w[d] e^(m_w - M) / sum_w l_w e^(m_w - M).
    """
    raise NotImplementedError("Day 78: per-lane registers, a page loop per warp with shfl_xor dot "
                              "products and an online softmax, a shared-memory merge (60 lines)")



_SIG = ("void(float32[:, :, ::1], float32[:, :, ::1], float16[:, :, :, ::1], float16[:, :, :, ::1], "
        "int32[:, ::1], int32[::1], float32)")
KERNELS = {
    "naive": (paged_attention_naive_kernel, _SIG),
    "optimized": (paged_attention_v1_kernel, _SIG),
}


def naive(query, key_cache, value_cache, block_tables, context_lens, scale):
    check_inputs(query, key_cache, value_cache, block_tables, context_lens, scale)
    args = launch.to_device(query, key_cache, value_cache, block_tables, context_lens)
    out = launch.empty(query.shape, np.float32)  # (num_seqs, num_heads, head_dim)
    n = query.shape[0] * query.shape[1]
    paged_attention_naive_kernel[launch.blocks(n, NAIVE_THREADS), NAIVE_THREADS](out, *args, float32(scale))
    return launch.result(out, query, key_cache)


def optimized(query, key_cache, value_cache, block_tables, context_lens, scale):
    check_inputs(query, key_cache, value_cache, block_tables, context_lens, scale)
    args = launch.to_device(query, key_cache, value_cache, block_tables, context_lens)
    out = launch.empty(query.shape, np.float32)
    grid = (query.shape[1], query.shape[0])  # (heads, seqs): a group's heads run side by side
    paged_attention_v1_kernel[grid, NUM_WARPS * WARP](out, *args, float32(scale))
    return launch.result(out, query, key_cache)
