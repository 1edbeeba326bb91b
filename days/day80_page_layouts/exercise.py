"""Day 80 exercise: page layouts -- the same PagedAttention on two arrangements of the bytes inside a page.

token-major   (num_blocks, block_size, num_kv_heads, head_dim): day 78's layout. A token's row of
              one KV head is contiguous; the next token's row is num_kv_heads * head_dim away.
vectorized    (num_blocks, num_kv_heads, head_dim // x, block_size, x), x = 16 bytes // itemsize:
              vLLM's key-cache layout. A row is cut into 16-byte chunks, and chunk c of every token
              of a page sits side by side: a page's tokens are interleaved chunk by chunk.

Both versions run one kernel (thread groups over tokens, as on day 78) with narrow groups: G = 4
lanes per token, lane g holding word g of every 16-byte chunk, so a warp load instruction reads
chunk c of 8 tokens at once; a block holds MAX_GROUP query heads of one KV head (day 79's schedule),
so each word is loaded and converted once for both. What those 8 x 16 bytes are in memory depends
only on the layout:

v1 naive      token-major layout: the 8 chunks lie num_kv_heads * head_dim * itemsize apart (2 KB at
              the benchmark's shape): 8 cache lines and 8 half-used 32-byte sectors per instruction;
              the other halves arrive one instruction later, from L1 if they are still there.
v2 optimized  vectorized layout: the 8 chunks are one 128-byte line, 4 whole sectors: the minimum a
              32-lane, 4-byte load can touch. Only the address arithmetic changes.

The contract. make_inputs builds one logical cache (day 78's, which is the token-major layout) and
returns the same data in both layouts, as two serving engines would each hold it:
(query, key_cache, value_cache, key_cache_x, value_cache_x, block_tables, context_lens, scale).
naive reads the token-major pair, optimized the vectorized pair; both validate all eight (the two
layouts must describe the same cache), reference and traffic read the token-major pair. V takes the
same vectorized layout as K here because our p.v step reads V with the same token-group mapping; vLLM
lays V out as (num_blocks, num_kv_heads, head_dim, block_size) because its p.v step gives lanes
columns, not tokens.

Napkin math (64 seqs x 32 heads over 8 KV heads x 128, context 4096, block 16, fp16): 1.07 GB of K/V
pages, ~0.26 ms at 4.1 TB/s in either layout: DRAM bytes are the same. What differs is the work of
the L1/load pipeline: 8 lines per load instruction instead of 1 for the same 128 useful bytes. With
one query head per block every page is loaded 4 times (34 M load instructions, ~260 M warp
instructions in all: as long as the DRAM time); two heads a block halve both. Four would not fit:
narrow groups give a lane 32 columns, 64 registers of q and accumulator per head.

What you write (each raises NotImplementedError with its hint until you do):
  layout_kernel.paged_attention_layout_kernel  day 78's kernel, G = 4 lanes a token, HG heads, words at base + row *
                                               row_stride + j * CHUNK_STRIDE (109 lines)
Everything else in this file is given. Grade with:  make check DAY=80
"""

import functools
import math

import numpy as np

from course import DEVICE, cuda, launch
from numba import float32, int32, uint32, uint64
from solutions.day78_paged_attention_v1 import (  # the day's problem is day 78's
    LOG2E,
    NO_LOGIT,
    WARP,
    Config,
    cache_words,
    check_inputs,
)
from solutions.day78_paged_attention_v1 import ERROR_FLOOR, RTOL, VERSION_RTOL  # noqa: F401  (graders read them)
from solutions.day78_paged_attention_v1 import library as day78_library
from solutions.day78_paged_attention_v1 import make_inputs as day78_inputs
from solutions.day78_paged_attention_v1 import reference as day78_reference
from solutions.day78_paged_attention_v1 import traffic as day78_traffic
from solutions.day79_paged_attention_gqa import heads_per_block  # day 79: equal chunks of a GQA group

TITLE = "Page layouts"
MEMORY_SPACE = "global"
VERSIONS = ("naive", "optimized")
BOUND = "memory"

NUM_WARPS = 2 if DEVICE.kind == "sim" else 4  # 64 threads in the simulator, which pays per thread
CHUNK_BYTES = 16  # vLLM's x: one 16-byte vector per chunk
CHUNK_WORDS = CHUNK_BYTES // 4
G = CHUNK_WORDS  # lanes per token: lane g reads word g of every chunk of its token
NG = WARP // G  # tokens a warp load instruction covers: 8
WORDS_IN_FLIGHT = 32  # K words (and as many V words) each lane loads per trip before reducing
# Query heads of one KV head per block: each K/V word is loaded and converted once for all of them.
# Narrow groups leave each lane 2 * 32 registers of q and accumulator per head at head_dim 128: two
# heads (128 registers) fit beside a trip's 64 words, four (256) would not.
MAX_GROUP = 2
LAYOUTS = ("token_major", "vectorized")

TEST_SIZES = (
    Config(4, 4, 2, 32, 8, 37, "float32"),  # contexts 37, 1, 8, 9; x = 4 elements
    Config(2, 8, 2, 64, 16, 40, "float16"),  # GQA 4:1, x = 8 elements; contexts 40, 1
    Config(3, 2, 1, 32, 32, 70, "float16"),  # MQA, block 32: contexts 70, 1, 32
)
BENCH_SIZES = (Config(64, 32, 8, 128, 16, 4096, "float16", ragged=False),)


# --- the two layouts -----------------------------------------------------------------------------


def chunk_elements(dtype) -> int:
    """vLLM's x: elements per 16-byte chunk (8 for fp16, 4 for fp32)."""
    return CHUNK_BYTES // np.dtype(dtype).itemsize


def vectorized_shape(shape, dtype) -> tuple:
    """(num_blocks, num_kv_heads, head_dim // x, block_size, x) for a token-major cache shape."""
    num_blocks, block_size, num_kv_heads, head_dim = shape
    x = chunk_elements(dtype)
    return num_blocks, num_kv_heads, head_dim // x, block_size, x


def to_vectorized(cache: np.ndarray) -> np.ndarray:
    """A token-major cache rearranged into the vectorized layout (host side, for the inputs)."""
    num_blocks, block_size, num_kv_heads, head_dim = cache.shape
    x = chunk_elements(cache.dtype)
    split = cache.reshape(num_blocks, block_size, num_kv_heads, head_dim // x, x)
    return np.ascontiguousarray(split.transpose(0, 2, 3, 1, 4))


def make_inputs(cfg, seed=0):
    """Day 78's inputs plus the same K/V pages in the vectorized layout (NaN slots included)."""
    query, key_cache, value_cache, tables, lens, scale = day78_inputs(cfg, seed)
    return (query, key_cache, value_cache, to_vectorized(key_cache), to_vectorized(value_cache), tables,
            lens, scale)


def reference(query, key_cache, value_cache, key_cache_x, value_cache_x, block_tables, context_lens, scale):
    """Day 78's plain reference on the token-major (logical) pair."""
    return day78_reference(query, key_cache, value_cache, block_tables, context_lens, scale)


def traffic(query, key_cache, value_cache, key_cache_x, value_cache_x, block_tables, context_lens, scale):
    """One layout's live K/V rows once, queries, outputs, tables."""
    return day78_traffic(query, key_cache, value_cache, block_tables, context_lens, scale)


def check_layouts(query, key_cache, value_cache, key_cache_x, value_cache_x, block_tables, context_lens,
                  scale):
    """Day 78's checks on the token-major pair, then: the vectorized pair is that cache's shape."""
    check_inputs(query, key_cache, value_cache, block_tables, context_lens, scale)
    want = vectorized_shape(key_cache.shape, key_cache.dtype)
    for name, a in (("key_cache_x", key_cache_x), ("value_cache_x", value_cache_x)):
        launch.check_array(name, a, dtype=key_cache.dtype, shape=want)


# --- one kernel, two layouts ---------------------------------------------------------------------


@functools.cache
def layout_kernel(head_dim: int, cache_dtype: str, block_size: int, layout: str, heads: int = 1):
    """The kernel for one (head_dim, dtype, block_size, layout, query heads per block). All five are
    compile-time constants: the layout only decides two strides, and with block_size fixed both fold
    into the loads' immediate offsets, so neither layout pays extra address arithmetic."""
    elem = np.dtype(cache_dtype).type
    PER_WORD = 4 // np.dtype(cache_dtype).itemsize
    ROW_WORDS = head_dim // PER_WORD
    WL = ROW_WORDS // CHUNK_WORDS  # words per lane per row: one of each chunk
    VEC = WL * PER_WORD  # elements per lane: d = (j * CHUNK_WORDS + g) * PER_WORD + p
    TOKENS = max(1, WORDS_IN_FLIGHT // WL)  # rows per group per trip
    KW = TOKENS * WL
    HEAD_DIM = head_dim
    BS = block_size
    HG = heads
    QN, SN, SMN = HG * VEC, HG * TOKENS, HG * head_dim  # array sizes must be plain constants for Numba
    VECTORIZED = layout == "vectorized"
    # Words between chunk j and j + 1 of one row: adjacent in a token-major row; a whole chunk column
    # (block_size tokens x 16 bytes) apart in the vectorized layout.
    CHUNK_STRIDE = BS * CHUNK_WORDS if VECTORIZED else CHUNK_WORDS

    @cuda.jit(fastmath=True)
    def paged_attention_layout_kernel(out, query, key_words, value_words, block_tables, context_lens, scale,
                                      num_kv_heads):
        """One block per (sequence, HG query heads of one KV head: h0 = blockIdx.x * HG), NUM_WARPS
        warps; day 78's kernel with narrow thread groups, holding q and the accumulator of every head
        (day 79's GQA schedule): each loaded word is converted once and used by the HG heads.

        key_words / value_words: the caches as flat uint32 words (cache_words). Lane `lane` is in group
        grp = lane // G (G = 4 lanes per token) and holds word g = lane % G of each of the row's WL
        16-byte chunks: elements d = (j * CHUNK_WORDS + g) * PER_WORD + p, j < WL, p < PER_WORD.

        - Addresses, in words: a page holds BS * ROW_WORDS * num_kv_heads words in both layouts.
          token-major: page + row * (num_kv_heads * ROW_WORDS) + kv_head * ROW_WORDS + j * 4 + g.
          vectorized:  page + kv_head * BS * ROW_WORDS + j * (BS * 4) + row * 4 + g.
          Both are base + row * row_stride + j * CHUNK_STRIDE: compute row_stride per layout
          (VECTORIZED is a compile-time constant), the 64-bit base once per page.
        - Warp w takes pages w, w + NUM_WARPS, ...; per trip group grp takes rows t0 + u * NG + grp,
          u < TOKENS. Issue every K and V load first (clamp dead rows onto n_tok - 1), read the words
          as elements through kbuf.view(elem), dot with q (pre-scaled: use exp2), shfl_xor over 2, 1.
        - Per head hh: online softmax per group (m from NO_LOGIT, l, acc), fold the groups with
          shfl_xor over 4, 8, 16, merge the warps through cuda.shared.array((NUM_WARPS, HG *
          HEAD_DIM), float32) as on day 78 and write out[seq, h0 + hh, d] = sum_w acc_w[d]
          2^(m_w - M) / sum_w l_w 2^(m_w - M).
        """
        raise NotImplementedError("Day 80: day 78's kernel, G = 4 lanes a token, HG heads, words at base + row * "
                                  "row_stride + j * CHUNK_STRIDE (109 lines)")

    return paged_attention_layout_kernel


_SIG = ("void(float32[:, :, ::1], float32[:, :, ::1], uint32[::1], uint32[::1], int32[:, ::1], int32[::1], "
        "float32, int32)")
KERNELS = {  # the benchmark's head_dim, dtype and block size
    "naive": (layout_kernel(128, "float16", 16, "token_major", MAX_GROUP), _SIG),
    "optimized": (layout_kernel(128, "float16", 16, "vectorized", MAX_GROUP), _SIG),
}


def _launch(layout, query, key_cache, value_cache, block_tables, context_lens, scale):
    q, kc, vc, tables, lens = launch.to_device(query, key_cache, value_cache, block_tables, context_lens)
    out = launch.empty(query.shape, np.float32)  # (num_seqs, num_heads, head_dim)
    num_seqs, num_heads, head_dim = query.shape
    block_size, num_kv_heads = (key_cache.shape[3], key_cache.shape[1]) if layout == "vectorized" \
        else (key_cache.shape[1], key_cache.shape[2])
    heads = heads_per_block(num_heads, num_kv_heads, MAX_GROUP)
    kernel = layout_kernel(head_dim, np.dtype(key_cache.dtype).name, block_size, layout, heads)
    words = cache_words(kc, np.uint32), cache_words(vc, np.uint32)  # the kernel reads 4-byte words
    grid = (num_heads // heads, num_seqs)  # a group's chunks side by side: they share pages in L2
    kernel[grid, NUM_WARPS * WARP](out, q, *words, tables, lens, float32(scale * LOG2E), int32(num_kv_heads))
    return launch.result(out, query, key_cache)


def naive(query, key_cache, value_cache, key_cache_x, value_cache_x, block_tables, context_lens, scale):
    """Reads the token-major pair: each load instruction gathers 16 bytes from 8 rows 2 KB apart."""
    check_layouts(query, key_cache, value_cache, key_cache_x, value_cache_x, block_tables, context_lens, scale)
    return _launch("token_major", query, key_cache, value_cache, block_tables, context_lens, scale)


def optimized(query, key_cache, value_cache, key_cache_x, value_cache_x, block_tables, context_lens, scale):
    """Reads the vectorized pair: each load instruction reads one whole 128-byte line."""
    check_layouts(query, key_cache, value_cache, key_cache_x, value_cache_x, block_tables, context_lens, scale)
    return _launch("vectorized", query, key_cache_x, value_cache_x, block_tables, context_lens, scale)


def library(query, key_cache, value_cache, key_cache_x, value_cache_x, block_tables, context_lens, scale):
    """PyTorch SDPA on a dense copy of the token-major cache (day 78's library row)."""
    return day78_library(query, key_cache, value_cache, block_tables, context_lens, scale)
