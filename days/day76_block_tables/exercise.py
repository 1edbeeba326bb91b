"""Day 76 exercise: block tables and slot mapping -- where each token of each sequence lives in the page pool.

Host side (graded by its own tests):
  BlockManager  maps each sequence's logical blocks (token t is in logical block t // block_size) to
                physical pages from day 75's BlockAllocator. Its block table is the list of those
                pages; a token's *slot* is page * block_size + t % block_size, a row index into the
                cache viewed as (num_blocks * block_size, num_kv_heads, head_dim). A request that
                cannot be met raises OutOfBlocksError and changes nothing.

Kernel: gather one sequence's pages into a contiguous buffer, out (2, context_len, num_kv_heads,
head_dim) -- what a dense attention kernel, a swap-out to host memory or a debugger needs.
v1 naive      one thread per output element: div/mod to find (K or V, token, element), a block-table
              lookup and a slot computation for every single element.
v2 optimized  one CUDA block per (page, K or V): the table entry is read once, and a page's tokens are
              one contiguous run in the cache and in the output, so the block copies it as machine
              words with no division at all.

Why the versions are the kernel's: the block table is host bookkeeping with one right answer; the
gather is what a GPU times. Day 75's allocator is imported, not copied.

Napkin math: a 64k-token float16 sequence with 8 KV heads x 128 holds 268 MB of K and V; gathering it
reads and writes that much: 537 MB, ~0.13 ms at the H200's ~4.1 TB/s copy rate.

What you write (each raises NotImplementedError with its hint until you do):
  BlockManager.allocate     ValueErrors first; OutOfBlocksError if blocks_for > free, before allocating; build the
                            table (10 lines)
  BlockManager.append_slot  pos = tokens stored; last page full: allocate one or raise; bump the length; return
                            pos's slot (8 lines)
  BlockManager.free         free every page of the table through self.allocator, then forget the sequence (4 lines)
  gather_naive_kernel       split i into kv, token t, element e with // and -; guard; copy from the table's page (10
                            lines)
  gather_kernel             page = block_table[p]; copy min(page_words, what is left of the output), striding by
                            blockDim.x (21 lines)
Everything else in this file is given. Grade with:  make check DAY=76
"""

import numpy as np

from course import cuda, launch
from course.launch import word_dtype
from solutions.day75_block_allocator import BlockAllocator

TITLE = "Block tables and slot mapping"
MEMORY_SPACE = "global"
VERSIONS = ("naive", "optimized")
# n = context_len, or (context_len, block_size, num_kv_heads, head_dim, dtype). Default pages hold 4
# tokens, so 1, 4, 5 are one token, one full page, one page plus a token.
TEST_SIZES = (1, 4, 5, 23, (7, 3, 1, 6, "float16"), (17, 8, 2, 4, "float32"), (9, 2, 1, 3, "float16"))
BENCH_SIZES = ((65536, 16, 8, 128, "float16"),)
BOUND = "memory"
THREADS = 256


class OutOfBlocksError(RuntimeError):
    """Not enough free pages for the request; nothing was changed."""


class BlockManager:
    """Block tables over a pool of ``num_blocks`` pages of ``block_size`` tokens."""

    def __init__(self, num_blocks: int, block_size: int):
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        self.block_size = block_size
        self.allocator = BlockAllocator(num_blocks)
        self._tables: dict[object, list[int]] = {}  # seq_id -> physical page of each logical block
        self._lens: dict[object, int] = {}  # seq_id -> tokens stored

    @property
    def num_blocks(self) -> int:
        return self.allocator.num_blocks

    @property
    def num_free_blocks(self) -> int:
        return self.allocator.num_free_blocks

    def blocks_for(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    def can_allocate(self, num_tokens: int) -> bool:
        return self.blocks_for(num_tokens) <= self.num_free_blocks

    def allocate(self, seq_id, num_tokens: int) -> None:
        """Pages for a new sequence's first ``num_tokens`` tokens (its prompt): blocks_for(num_tokens)
        pages from the allocator, in logical order. ValueError for a known seq_id or num_tokens < 0;
        OutOfBlocksError, before any page is taken, when too few are free."""
        raise NotImplementedError("Day 76: ValueErrors first; OutOfBlocksError if blocks_for > free, before "
                                  "allocating; build the table (10 lines)")

    def append_slot(self, seq_id) -> int:
        """Room for one more token; returns its slot (page * block_size + offset). A new page is taken
        only when the last one is full; OutOfBlocksError (nothing changed) when none is free. KeyError
        for an unknown sequence (self._table raises it)."""
        raise NotImplementedError("Day 76: pos = tokens stored; last page full: allocate one or raise; bump the "
                                  "length; return pos's slot (8 lines)")

    def free(self, seq_id) -> None:
        """Every page of the sequence back to the allocator, and the sequence forgotten (KeyError if
        unknown)."""
        raise NotImplementedError("Day 76: free every page of the table through self.allocator, then forget the "
                                  "sequence (4 lines)")

    def block_table(self, seq_id) -> list[int]:
        return list(self._table(seq_id))

    def num_tokens(self, seq_id) -> int:
        self._table(seq_id)
        return self._lens[seq_id]

    def slot_mapping(self, seq_id, start: int = 0, end: int | None = None) -> list[int]:
        """Slots of tokens start..end-1 (default: all of them): what reshape-and-cache writes through."""
        table, bs = self._table(seq_id), self.block_size
        end = self._lens[seq_id] if end is None else end
        if not 0 <= start <= end <= self._lens[seq_id]:
            raise ValueError(f"tokens {start}..{end} are outside 0..{self._lens[seq_id]}")
        return [table[t // bs] * bs + t % bs for t in range(start, end)]

    def _table(self, seq_id) -> list[int]:
        if seq_id not in self._tables:
            raise KeyError(f"unknown sequence {seq_id!r}")
        return self._tables[seq_id]


# --- the day contract: gather a sequence's pages ---------------------------------------------------------

def _geometry(n):
    if isinstance(n, (tuple, list)):
        ctx, block_size, heads, head_dim, dtype = n
        return int(ctx), int(block_size), int(heads), int(head_dim), np.dtype(dtype)
    return int(n), 4, 2, 8, np.dtype(np.float16)


def make_inputs(n, seed: int = 0):
    """A pool with one sequence scattered over random pages; every other slot holds NaN."""
    ctx, block_size, heads, head_dim, dtype = _geometry(n)
    rng = np.random.default_rng(seed)
    pages = -(-ctx // block_size)
    num_blocks = 2 * pages + 3
    kv_cache = np.full((2, num_blocks, block_size, heads, head_dim), np.nan, dtype=dtype)
    block_table = np.full(pages + 2, 10**6, dtype=np.int32)  # entries past the last page: garbage
    block_table[:pages] = rng.permutation(num_blocks)[:pages]
    tokens = rng.standard_normal((2, ctx, heads, head_dim)).astype(dtype)
    for t in range(ctx):
        kv_cache[:, block_table[t // block_size], t % block_size] = tokens[:, t]
    return kv_cache, block_table, ctx


def reference(kv_cache, block_table, context_len):
    block_size = kv_cache.shape[2]
    out = np.empty((2, context_len) + kv_cache.shape[3:], dtype=kv_cache.dtype)
    for t in range(context_len):
        out[:, t] = kv_cache[:, block_table[t // block_size], t % block_size]
    return out


def traffic(kv_cache, block_table, context_len):
    token_bytes = 2 * int(np.prod(kv_cache.shape[3:])) * kv_cache.itemsize  # K and V
    return 2 * token_bytes * context_len, 0


@cuda.jit
def gather_naive_kernel(cache, block_table, out):
    # cache: (2, num_blocks, block_size, row) with row = num_kv_heads * head_dim; out: (2, context_len, row)
    """One thread per output element i of out (2, context_len, row): i = (kv * context_len + t) * row + e.
    Guard i < out.size; read page block_table[t // block_size] and copy cache[kv, page, t % block_size, e]."""
    raise NotImplementedError("Day 76: split i into kv, token t, element e with // and -; guard; copy from the table's "
                              "page (10 lines)")


@cuda.jit
def gather_kernel(cache_words, block_table, out_words):
    # cache_words: (2, num_blocks, page_words); out_words: (2, context_len * row_words)
    """One CUDA block per (logical page p = blockIdx.x, K or V = blockIdx.y): grid (pages, 2). Page p's
    tokens are one contiguous run of words in the cache (cache_words[kv, block_table[p], :]) and in the
    output (starting at p * page_words). The last page may be partly filled: copy only the words that
    fit in out_words. Stretch: four loads before four stores."""
    raise NotImplementedError("Day 76: page = block_table[p]; copy min(page_words, what is left of the output), "
                              "striding by blockDim.x (21 lines)")


_NAIVE_SIG = "void(float16[:, :, :, ::1], int32[::1], float16[:, :, ::1])"
_OPT_SIG = "void(uint64[:, :, ::1], int32[::1], uint64[:, ::1])"
KERNELS = {"naive": (gather_naive_kernel, _NAIVE_SIG), "optimized": (gather_kernel, _OPT_SIG)}


def _check(kv_cache, block_table, context_len):
    launch.check_array("kv_cache", kv_cache, dtype=(np.float16, np.float32), ndim=5)
    if kv_cache.shape[0] != 2:
        raise ValueError("kv_cache: expected shape (2, num_blocks, block_size, num_kv_heads, head_dim), "
                         f"got {tuple(kv_cache.shape)}")
    launch.check_array("block_table", block_table, dtype=np.int32, ndim=1)
    if not isinstance(context_len, (int, np.integer)) or isinstance(context_len, bool):
        raise ValueError(f"context_len: expected an int, got {type(context_len).__name__}")
    block_size = kv_cache.shape[2]
    pages = -(-int(context_len) // block_size)
    if not 1 <= context_len <= block_table.shape[0] * block_size:
        raise ValueError(f"context_len: expected 1..{block_table.shape[0] * block_size} "
                         f"(the table has {block_table.shape[0]} pages of {block_size}), got {context_len}")
    if isinstance(block_table, np.ndarray):  # a device table is trusted: checking it costs a copy
        used = block_table[:pages]
        if used.min() < 0 or used.max() >= kv_cache.shape[1]:
            raise ValueError(f"block_table: the first {pages} entries must lie in 0..{kv_cache.shape[1] - 1}")
    return block_size, pages


def _out(kv_cache, context_len):
    return launch.empty((2, int(context_len)) + tuple(kv_cache.shape[3:]), kv_cache.dtype)


def naive(kv_cache, block_table, context_len):
    _check(kv_cache, block_table, context_len)
    d_cache, d_table = launch.to_device(kv_cache, block_table)
    _, num_blocks, block_size, heads, head_dim = d_cache.shape
    out = _out(kv_cache, context_len)
    row = heads * head_dim
    cache = d_cache.reshape(2, num_blocks, block_size, row)
    flat_out = out.reshape(2, int(context_len), row)
    gather_naive_kernel[launch.blocks(out.size, THREADS), THREADS](cache, d_table, flat_out)
    return launch.result(out, kv_cache, block_table)


def optimized(kv_cache, block_table, context_len):
    _, pages = _check(kv_cache, block_table, context_len)
    d_cache, d_table = launch.to_device(kv_cache, block_table)
    _, num_blocks, block_size, heads, head_dim = d_cache.shape
    out = _out(kv_cache, context_len)
    # The widest word that tiles one token's row, so a partial last page still ends on a word.
    word = word_dtype(heads * head_dim * d_cache.dtype.itemsize)
    cache_words = d_cache.reshape(2, num_blocks, block_size * heads * head_dim).view(word)
    out_words = out.reshape(2, int(context_len) * heads * head_dim).view(word)
    threads = min(THREADS, 32 * -(-cache_words.shape[2] // 32))
    gather_kernel[(pages, 2), threads](cache_words, d_table, out_words)
    return launch.result(out, kv_cache, block_table)


def library(kv_cache, block_table, context_len):
    """The same gather as CuPy fancy indexing over the used pages."""
    import cupy

    cache, table = cupy.asarray(kv_cache), cupy.asarray(block_table)
    pages = -(-int(context_len) // cache.shape[2])
    return cache[:, table[:pages]].reshape((2, -1) + cache.shape[3:])[:, :context_len]
