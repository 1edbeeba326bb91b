"""Day 83: copy-on-write -- a forked page is copied only when a sharer writes into it.

Day 82's fork copied a partly filled last page at once, even for a sample that never grows or whose
parent is freed a moment later. Copy-on-write shares every page at fork time and defers the copy
to the first append that lands in a page somebody else still holds.

Host side (graded by its own tests):
  BlockManager  day 82's SharingBlockManager with
    fork(parent, child)   the child shares every page, the partial last one too; ref counts rise.
    append_slot(seq)      when the token lands in a page whose ref count is > 1, take exactly one
                          new page, owe the copy (old, new) to take_copies(), drop one ref of the old
                          page, and write into the new one; the other owners keep the old page. A
                          page with one owner is written in place, whatever its history.
    take_copies()         the (src, dst) copies the appends since the last call require.
  OutOfBlocksError (day 76) when no page is free for a needed copy; nothing changes.

The day contract is one decode step over forked samples: append each sample's new token, then
attend. The plan (which pages to copy, where each token goes) is host bookkeeping, as in a serving
engine's scheduler; the copies, the token writes and the attention are kernels:
  v1 naive      plan_copy_sequence: a sample appending into a shared page gets private copies of
                every page of its sequence (day 75's copy_blocks moves them all).
  v2 optimized  plan_copy_on_write: the same rule as append_slot: one page copied, only while shared.
Both then write the tokens with day 77's reshape_and_cache kernel and decode with day 78's
PagedAttention over the new tables.

Napkin math (16 samples forked from a 4001-token prompt, 8 KV heads x 128, fp16, pages of 16): a page
of K and V is 64 KB. On the first step after the fork every sample but the last owner of the shared
tail page appends into it: copy-on-write copies 15 pages (1 MB read + 1 MB written, microseconds);
copying each whole sequence moves 15 x 251 pages x 64 KB = 246 MB each way, ~0.12 ms at ~4.1 TB/s,
and holds 3,765 more pages.
"""

import math
from collections import Counter
from typing import NamedTuple

import numpy as np

from course import cuda, launch
from course.checking import to_host
from course.launch import as_words, word_dtype
from solutions.day75_block_allocator import copy_blocks_kernel
from solutions.day76_block_tables import OutOfBlocksError
from solutions.day77_reshape_and_cache import reshape_and_cache_kernel
from solutions.day78_paged_attention_v1 import KERNELS as PAGED_ATTENTION_KERNELS
from solutions.day78_paged_attention_v1 import check_inputs
from solutions.day78_paged_attention_v1 import reference as paged_reference
from solutions.day82_prefix_sharing import SharingBlockManager, attend

TITLE = "Copy-on-write"
MEMORY_SPACE = "global"
VERSIONS = ("naive", "optimized")
BOUND = "memory"
ERROR_FLOOR = 1e-2  # attention outputs average many rows towards zero (course.checking: the floor)

__all__ = ["BlockManager", "OutOfBlocksError"]


class BlockManager(SharingBlockManager):
    """Block tables with fork and copy-on-write (the interface later days build on)."""

    def fork(self, parent_id, child_id) -> None:
        """The child shares every page of the parent, the partial last one too (each gains an owner
        through ``self.allocator.incref``); the child's table is a copy of the parent's list, its length
        the parent's. Nothing is copied yet."""
        # EXERCISE: table = self._new_child(parent, child); incref every page; the child's table and length
        table = self._new_child(parent_id, child_id)
        for block in table:
            self.allocator.incref(block)
        self._tables[child_id] = list(table)
        self._lens[child_id] = self._lens[parent_id]

    def append_slot(self, seq_id) -> int:
        """Room for one more token; a shared page is copied first (one page, once). Returns the slot.

        A token landing in a page with ref count > 1 takes one new page: owe the copy (old, new) in
        ``self._copies``, drop one ref of the old page (the other owners keep it), put the new page in
        the table. A page with one owner is written in place, whatever its history; a full last page
        opens a new one. OutOfBlocksError, changing nothing, when the page it needs finds no free block.
        """
        # EXERCISE: j, offset = divmod(len, block_size); a shared page: copy it; j == len(table): a new page
        table = self._table(seq_id)
        pos = self._lens[seq_id]
        j, offset = divmod(pos, self.block_size)
        if j < len(table) and self.allocator.ref_count(table[j]) > 1:
            # Another sequence still reads this page: write into a private copy instead.
            if self.num_free_blocks == 0:
                raise OutOfBlocksError(f"sequence {seq_id!r} must copy shared block {table[j]} before "
                                       "writing, but no block is free")
            new = self.allocator.allocate()
            self._copies.append((table[j], new))
            self.allocator.free(table[j])  # one owner fewer; the others keep the original
            table[j] = new
        elif j == len(table):
            if self.num_free_blocks == 0:
                raise OutOfBlocksError(f"sequence {seq_id!r} needs a new block for token {pos}; none is free")
            table.append(self.allocator.allocate())
        self._lens[seq_id] = pos + 1
        return table[j] * self.block_size + offset


# --- the plans: which pages to copy and where each new token goes ---------------------------------------


def _live_refs(tables, lens, block_size) -> Counter:
    return Counter(int(b) for s in range(len(lens)) for b in tables[s, :math.ceil(int(lens[s]) / block_size)])


def plan_copy_sequence(tables, lens, block_size, free_blocks):
    """v1: a sample appending into a shared page copies every page of its sequence.

    Returns (new_tables, copies, slots): tables after the step, (src, dst) page copies, and the slot
    of each sample's new token. Free pages are taken from ``free_blocks`` in order. Start from
    refs = _live_refs(...): a sample's copies drop one ref from each page it leaves.
    """
    # EXERCISE: per sample: if it appends into a shared page, copy every page; a full last page opens one
    tables, free = tables.copy(), iter(int(b) for b in free_blocks)
    refs = _live_refs(tables, lens, block_size)
    copies, slots = [], []
    for s, n in enumerate(int(x) for x in lens):
        j, offset = divmod(n, block_size)
        pages = math.ceil(n / block_size)
        if offset and refs[int(tables[s, j])] > 1:
            for k in range(pages):
                old, new = int(tables[s, k]), next(free)
                copies.append((old, new))
                refs[old] -= 1
                tables[s, k] = new
        if j == pages:  # the last page is full: open a new one
            tables[s, j] = next(free)
        slots.append(int(tables[s, j]) * block_size + offset)
    return tables, copies, slots


def plan_copy_on_write(tables, lens, block_size, free_blocks):
    """v2: the rule of BlockManager.append_slot: one page copied, and only while it is shared.

    Same outputs as plan_copy_sequence. The last owner left of a shared page writes in place.
    """
    # EXERCISE: like plan_copy_sequence, but copy only page j, and drop its ref so the last owner keeps it
    tables, free = tables.copy(), iter(int(b) for b in free_blocks)
    refs = _live_refs(tables, lens, block_size)
    copies, slots = [], []
    for s, n in enumerate(int(x) for x in lens):
        j, offset = divmod(n, block_size)
        if offset and refs[int(tables[s, j])] > 1:
            old, new = int(tables[s, j]), next(free)
            copies.append((old, new))
            refs[old] -= 1  # the last owner left writes in place: no copy for it
            tables[s, j] = new
        elif not offset:
            tables[s, j] = next(free)
        slots.append(int(tables[s, j]) * block_size + offset)
    return tables, copies, slots


# --- the day contract: append one token per forked sample, then decode ------------------------------------


class Config(NamedTuple):
    """``num_samples`` forks of a ``prompt_len``-token prompt; some have decoded up to ``gen_len`` tokens
    (copying their tail page then), the rest still share every page with the prompt."""

    num_samples: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    block_size: int
    prompt_len: int
    gen_len: int
    cache_dtype: str = "float16"


TEST_SIZES = (
    Config(4, 2, 1, 32, 8, 21, 4, "float32"),  # the prompt ends mid-page: appends land in a shared page
    Config(3, 4, 2, 32, 4, 16, 3, "float16"),  # ends on a page boundary: the next token opens a page
    Config(2, 2, 2, 32, 16, 9, 0, "float16"),  # nobody has decoded yet: every page shared
    Config(1, 2, 1, 32, 8, 5, 2, "float32"),  # one sample: nothing shared
)
BENCH_SIZES = (Config(16, 32, 8, 128, 16, 4001, 0, "float16"),)  # the prompt ends one token into a page


def make_inputs(cfg, seed: int = 0):
    """(query, kv_cache, block_tables, context_lens, scale, new_kv, free_blocks).

    kv_cache (2, num_blocks, block_size, num_kv_heads, head_dim) as days 75 and 77 lay it out; the
    tables are what this day's BlockManager left after forking and a few decode steps; new_kv
    (2, num_samples, num_kv_heads, head_dim) is each sample's next token; free_blocks (int32) lists
    the free pages in the order the plans take them. Unowned slots hold NaN.
    """
    cfg = Config(*cfg)
    rng = np.random.default_rng(seed)
    bs, S = cfg.block_size, cfg.num_samples
    pages = math.ceil((cfg.prompt_len + cfg.gen_len + 1) / bs)
    num_blocks = S * pages + pages + 2  # room for the naive plan's whole-sequence copies
    bm = BlockManager(num_blocks, bs)
    for i in range(num_blocks):  # a pool that has seen traffic: free pages come out shuffled
        bm.allocate(("old", i), 1)
    for i in rng.permutation(num_blocks):
        bm.free(("old", int(i)))
    dtype = np.dtype(cfg.cache_dtype)
    kv = np.full((2, num_blocks, bs, cfg.num_kv_heads, cfg.head_dim), np.nan, dtype=dtype)
    rows = kv.reshape(2, num_blocks * bs, cfg.num_kv_heads, cfg.head_dim)

    def fresh(n):
        return rng.standard_normal((2, n, cfg.num_kv_heads, cfg.head_dim), dtype=np.float32).astype(dtype)

    bm.allocate(0, cfg.prompt_len)
    rows[:, bm.slot_mapping(0)] = fresh(cfg.prompt_len)
    for s in range(1, S):
        bm.fork(0, s)
    for s in range(S):  # about half the samples decode a little; their first append copies the tail
        for _ in range(int(rng.integers(0, cfg.gen_len + 1)) if s % 2 else 0):
            slot = bm.append_slot(s)
            for src, dst in bm.take_copies():
                kv[:, dst] = kv[:, src]
            rows[:, slot] = fresh(1)[:, 0]
    max_blocks = max(len(bm.block_table(s)) for s in range(S)) + 2  # room for a new page, then garbage
    tables = rng.integers(-(1 << 30), 1 << 30, size=(S, max_blocks)).astype(np.int32)
    for s in range(S):
        tables[s, :len(bm.block_table(s))] = bm.block_table(s)
    lens = np.array([bm.num_tokens(s) for s in range(S)], dtype=np.int32)
    used = {b for s in range(S) for b in bm.block_table(s)}
    free = np.array([b for b in rng.permutation(num_blocks) if b not in used], dtype=np.int32)
    query = rng.standard_normal((S, cfg.num_heads, cfg.head_dim), dtype=np.float32)
    new_kv = fresh(S)
    return query, kv, tables, lens, 1.0 / math.sqrt(cfg.head_dim), new_kv, free


def reference(query, kv_cache, block_tables, context_lens, scale, new_kv, free_blocks):
    """Plainly: each sample's context gathered from the old pages, its new token appended, then decode."""
    bs = kv_cache.shape[2]
    S = len(context_lens)
    ctx = [int(n) + 1 for n in context_lens]
    pages = [math.ceil(n / bs) for n in ctx]
    cache = np.full((2, sum(pages)) + kv_cache.shape[2:], np.nan, dtype=kv_cache.dtype)
    tables = np.zeros((S, max(pages)), dtype=np.int32)
    first = 0
    for s in range(S):
        tables[s, :pages[s]] = np.arange(first, first + pages[s])
        for t in range(ctx[s] - 1):
            page = block_tables[s, t // bs]
            cache[:, first + t // bs, t % bs] = kv_cache[:, page, t % bs]
        t = ctx[s] - 1
        cache[:, first + t // bs, t % bs] = new_kv[:, s]
        first += pages[s]
    return paged_reference(query, cache[0], cache[1], tables, np.array(ctx, dtype=np.int32), scale)


def traffic(query, kv_cache, block_tables, context_lens, scale, new_kv, free_blocks):
    """The minimum: each distinct live page read once by the decode, the new tokens written once."""
    tables, lens = to_host(block_tables), to_host(context_lens)
    bs = kv_cache.shape[2]
    page_bytes = 2 * int(np.prod(kv_cache.shape[2:])) * np.dtype(kv_cache.dtype).itemsize
    pages = _live_refs(tables, lens, bs)
    return len(pages) * page_bytes + new_kv.size * new_kv.itemsize + 2 * query.size * 4, \
        4 * int(np.sum(lens)) * query.shape[1] * query.shape[2]


_COPY_SIG = "void(uint64[:, ::1], uint64[:, ::1], int32[:, ::1])"
_WRITE_SIG = "void(uint64[:, ::1], uint64[:, ::1], uint64[:, :, ::1], int64[::1])"
KERNELS = {
    "naive.copy_blocks": (copy_blocks_kernel, _COPY_SIG),
    "naive.write": (reshape_and_cache_kernel, _WRITE_SIG),
    "naive.attention": PAGED_ATTENTION_KERNELS["optimized"],
    "optimized.copy_blocks": (copy_blocks_kernel, _COPY_SIG),
    "optimized.write": (reshape_and_cache_kernel, _WRITE_SIG),
    "optimized.attention": PAGED_ATTENTION_KERNELS["optimized"],
}


def _check(query, kv_cache, block_tables, context_lens, scale, new_kv, free_blocks):
    launch.check_array("kv_cache", kv_cache, dtype=(np.float16, np.float32), ndim=5)
    if kv_cache.shape[0] != 2:
        raise ValueError("kv_cache: expected shape (2, num_blocks, block_size, num_kv_heads, head_dim), "
                         f"got {tuple(kv_cache.shape)}")
    check_inputs(query, kv_cache[0], kv_cache[1], block_tables, context_lens, scale)
    S = query.shape[0]
    launch.check_array("new_kv", new_kv, dtype=kv_cache.dtype, shape=(2, S) + tuple(kv_cache.shape[3:]))
    launch.check_array("free_blocks", free_blocks, dtype=np.int32, ndim=1)
    tables, lens, bs = to_host(block_tables), to_host(context_lens), kv_cache.shape[2]
    if np.any(lens + 1 > tables.shape[1] * bs):
        raise ValueError(f"block_tables: {tables.shape[1]} columns leave no room for the new tokens")
    free = to_host(free_blocks)
    if free.size and (free.min() < 0 or free.max() >= kv_cache.shape[1] or len(set(free.tolist())) != free.size):
        raise ValueError(f"free_blocks: expected distinct blocks in 0..{kv_cache.shape[1] - 1}")
    if set(free.tolist()) & set(_live_refs(tables, lens, bs)):
        raise ValueError("free_blocks: lists a block that a sequence's table uses")
    return tables, lens, free


def _step(plan, query, kv_cache, block_tables, context_lens, scale, new_kv, free_blocks):
    tables, lens, free = _check(query, kv_cache, block_tables, context_lens, scale, new_kv, free_blocks)
    bs = kv_cache.shape[2]
    try:
        new_tables, copies, slots = plan(tables, lens, bs, free)
    except StopIteration:
        raise ValueError(f"free_blocks: {free.size} free blocks do not cover this step's copies") from None
    q, kv, new = launch.to_device(query, kv_cache, new_kv)
    num_blocks = kv.shape[1]
    if copies:  # page copies first: a token written before its page is copied would be lost
        mapping = cuda.to_device(np.array(copies, dtype=np.int32))
        keys, values = as_words(kv[0], num_blocks), as_words(kv[1], num_blocks)
        copy_blocks_kernel[(len(copies), 2), min(256, 32 * -(-keys.shape[1] // 32))](keys, values, mapping)
    S = query.shape[0]
    row = int(np.prod(kv.shape[3:]))
    word = word_dtype(row * kv.dtype.itemsize)  # a token's row is contiguous: move it as words
    cache_words = kv.reshape(2, num_blocks * bs, row).view(word)  # (2, num_slots, row_words)
    new_words = new.reshape(2, S, row).view(word)  # (2, num_samples, row_words)
    reshape_and_cache_kernel[S, 32](new_words[0], new_words[1], cache_words,
                                    cuda.to_device(np.array(slots, dtype=np.int64)))
    d_tables, d_lens = cuda.to_device(new_tables), cuda.to_device(lens + 1)
    return attend(query, q, kv[0], kv[1], d_tables, d_lens, scale)


def naive(query, kv_cache, block_tables, context_lens, scale, new_kv, free_blocks):
    """v1: appending into a shared page copies the sample's whole sequence."""
    # EXERCISE: return _step(plan_copy_sequence, ...) with every input
    return _step(plan_copy_sequence, query, kv_cache, block_tables, context_lens, scale, new_kv, free_blocks)


def optimized(query, kv_cache, block_tables, context_lens, scale, new_kv, free_blocks):
    """v2: copy-on-write: one page, only while shared."""
    # EXERCISE: return _step(plan_copy_on_write, ...) with every input
    return _step(plan_copy_on_write, query, kv_cache, block_tables, context_lens, scale, new_kv, free_blocks)


def pages_copied(cfg, seed: int = 0) -> dict:
    """How many pages each plan copies on the first step of ``cfg`` (the memory and bytes it costs)."""
    _, kv, tables, lens, _, _, free = make_inputs(cfg, seed)
    bs = kv.shape[2]
    return {name: len(plan(tables, lens, bs, free)[1])
            for name, plan in (("naive", plan_copy_sequence), ("optimized", plan_copy_on_write))}
