"""Day 82 exercise: prefix sharing -- parallel sampling forks a prompt's pages instead of copying them.

Parallel sampling (n completions of one prompt) and beam search start from one sequence and split
it. Every child needs the prompt's K and V; the question is whether it gets its own copy.

Host side (graded by its own tests):
  SharingBlockManager  day 76's BlockManager plus
    copy_fork(parent, child)  naive: the child gets fresh pages for every block of the parent and a
                              page copy for each: n samples hold n copies of the prompt.
    fork(parent, child)       shared: the child's table points at the parent's full pages, whose ref
                              counts rise (day 75); only a partially filled last page is copied,
                              because both owners will write their next tokens into it.
    take_copies()             the (src, dst) page copies the forks since the last call require;
                              the caller runs them (day 75's copy_blocks) before writing any token.

The day contract is "fork, then one decode step" over forked samples whose tables already share
the prompt's full pages (as fork leaves them):
  v1 naive      a system without sharing: unshare_kernel gives every sample but the first private
                copies of the shared pages (new tables + a copy plan), day 75's copy_blocks kernel
                copies them, then day 78's PagedAttention decodes over the private pages.
  v2 optimized  day 78's PagedAttention straight on the shared tables: sharing needs nothing from the
                kernel, and the samples' blocks re-read the same prompt pages, which L2 serves.
Why host code plus kernels: who owns a page is bookkeeping with one right answer; what sharing
saves on the GPU is the copies and the distinct bytes a decode step reads, which a kernel times.

Napkin math (16 samples, prompt 4096 tokens, 8 KV heads x 128, fp16, pages of 16): the prompt's K and
V are 4096 * 8 * 128 * 2 B * 2 = 16.8 MB. Copying it for 15 more samples reads and writes 252 MB
each way (~0.12 ms at ~4.1 TB/s) and holds 15 x 256 extra pages; shared, the 16.8 MB sit once in
HBM and fit in the H200's 60 MB L2, so 16 samples read them from HBM about once.

What you write (each raises NotImplementedError with its hint until you do):
  SharingBlockManager.copy_fork  table = self._new_child(...); OutOfBlocksError if too few free; fresh pages + their
                                 copies (8 lines)
  SharingBlockManager.fork       a partial last page needs one free page, else OutOfBlocksError; incref the rest;
                                 copy it (15 lines)
  unshare_kernel                 i = cuda.grid(1); guard; s, j from the table width; new_tables[s, j]; a copy row
                                 where s > 0, j < shared (14 lines)
  optimized                      validate with _check, then day 78's attention (paged_attention) on the tables as
                                 they are (2 lines)
Everything else in this file is given. Grade with:  make check DAY=82
"""

import math
from typing import NamedTuple

import numpy as np

from course import cuda, launch
from course.launch import as_words
from solutions.day75_block_allocator import copy_blocks_kernel
from solutions.day76_block_tables import BlockManager, OutOfBlocksError
from solutions.day78_paged_attention_v1 import KERNELS as PAGED_ATTENTION_KERNELS
from solutions.day78_paged_attention_v1 import VERSION_RTOL  # noqa: F401  (the bench reads it: SDPA in fp16)
from solutions.day78_paged_attention_v1 import check_inputs
from solutions.day78_paged_attention_v1 import optimized as paged_attention
from solutions.day78_paged_attention_v1 import reference as paged_reference

TITLE = "Prefix sharing: fork with ref counts"
MEMORY_SPACE = "global"
VERSIONS = ("naive", "optimized")
BOUND = "memory"
ERROR_FLOOR = 1e-2  # attention outputs average many rows towards zero (course.checking: the floor)
THREADS = 128

__all__ = ["OutOfBlocksError", "SharingBlockManager"]


class SharingBlockManager(BlockManager):
    """Block tables whose pages several sequences may share (ref counts in day 75's allocator)."""

    def __init__(self, num_blocks: int, block_size: int):
        super().__init__(num_blocks, block_size)
        self._copies: list[tuple[int, int]] = []  # (src, dst) pages to copy before the next write

    def ref_count(self, block: int) -> int:
        return self.allocator.ref_count(block)

    def copy_fork(self, parent_id, child_id) -> None:
        """v1: the child gets a private copy of every page of the parent.

        One fresh page per parent page, each recorded as a (src, dst) copy in ``self._copies``
        (take_copies hands them out); the child's table is the fresh pages, its length the parent's.
        OutOfBlocksError, changing nothing, when the free pages cannot hold the copies.
        """
        raise NotImplementedError("Day 82: table = self._new_child(...); OutOfBlocksError if too few free; fresh pages "
                                  "+ their copies (8 lines)")

    def fork(self, parent_id, child_id) -> None:
        """v2: the child shares the parent's full pages; a partially filled last page is copied.

        Each shared page gains an owner (``self.allocator.incref``). A partial last page (length not a
        multiple of block_size) gets a fresh page for the child and a (src, dst) copy in
        ``self._copies``. OutOfBlocksError, before any change, when that page finds no free block.
        """
        raise NotImplementedError("Day 82: a partial last page needs one free page, else OutOfBlocksError; incref the "
                                  "rest; copy it (15 lines)")

    def take_copies(self) -> list[tuple[int, int]]:
        """The page copies owed since the last call, as (src, dst); run them before writing tokens."""
        copies, self._copies = self._copies, []
        return copies

    def num_used_blocks(self) -> int:
        return self.num_blocks - self.num_free_blocks

    def _new_child(self, parent_id, child_id) -> list[int]:
        table = self._table(parent_id)
        if child_id in self._tables:
            raise ValueError(f"sequence {child_id!r} already has a block table")
        return table


# --- the day contract: fork, then one decode step ----------------------------------------------------


class Config(NamedTuple):
    """``num_samples`` completions of one prompt of ``prompt_len`` tokens, each already ``gen_len`` or
    fewer tokens in (random per sample, so the contexts are ragged)."""

    num_samples: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    block_size: int
    prompt_len: int
    gen_len: int
    cache_dtype: str = "float16"


# Prompt lengths that end mid-page (the copied partial page) and on a page boundary (nothing copied).
TEST_SIZES = (
    Config(3, 2, 1, 32, 8, 21, 5, "float32"),
    Config(4, 4, 2, 32, 4, 16, 3, "float16"),
    Config(2, 2, 2, 32, 16, 33, 1, "float16"),
    Config(1, 2, 1, 32, 8, 9, 2, "float32"),  # one sample: nothing to share or copy
)
BENCH_SIZES = (Config(16, 32, 8, 128, 16, 4096, 64, "float16"),)


def build_samples(cfg: Config, rng, manager_cls=SharingBlockManager, spare: int | None = None):
    """Run parallel sampling on a manager: prompt as sequence 0, fork it, decode a few tokens each.

    Returns (manager, key_cache, value_cache, token K/V per sample as lists of (ctx, kv_heads, dim)).
    Every slot no sequence owns holds NaN, so a read through a wrong table entry shows up.
    """
    bs = cfg.block_size
    prompt_blocks = math.ceil(cfg.prompt_len / bs)
    gen = [int(rng.integers(0, cfg.gen_len + 1)) for _ in range(cfg.num_samples)]
    private = sum(math.ceil((cfg.prompt_len + g) / bs) - cfg.prompt_len // bs for g in gen)
    full = cfg.prompt_len // bs
    if spare is None:
        spare = (cfg.num_samples - 1) * full + 3  # room for the naive version's private copies
    num_blocks = prompt_blocks + private + spare
    bm = manager_cls(num_blocks, bs)
    for i in range(num_blocks):  # a pool that has seen traffic: free pages come out shuffled
        bm.allocate(("old", i), 1)
    for i in rng.permutation(num_blocks):
        bm.free(("old", int(i)))
    dtype = np.dtype(cfg.cache_dtype)
    shape = (num_blocks, bs, cfg.num_kv_heads, cfg.head_dim)
    kc, vc = np.full(shape, np.nan, dtype=dtype), np.full(shape, np.nan, dtype=dtype)
    rows_k, rows_v = kc.reshape(-1, *shape[2:]), vc.reshape(-1, *shape[2:])

    def fresh(n):
        return rng.standard_normal((n, cfg.num_kv_heads, cfg.head_dim), dtype=np.float32).astype(dtype)

    pk, pv = fresh(cfg.prompt_len), fresh(cfg.prompt_len)
    bm.allocate(0, cfg.prompt_len)
    slots = bm.slot_mapping(0)
    rows_k[slots], rows_v[slots] = pk, pv
    for s in range(1, cfg.num_samples):
        bm.fork(0, s)
    for src, dst in bm.take_copies():
        kc[dst], vc[dst] = kc[src], vc[src]
    keys, values = [], []
    for s in range(cfg.num_samples):
        gk, gv = fresh(gen[s]), fresh(gen[s])
        for t in range(gen[s]):
            slot = bm.append_slot(s)
            rows_k[slot], rows_v[slot] = gk[t], gv[t]
        keys.append(np.concatenate([pk, gk]))
        values.append(np.concatenate([pv, gv]))
    return bm, kc, vc, keys, values


def make_inputs(cfg, seed: int = 0):
    """(query, key_cache, value_cache, block_tables, context_lens, scale, shared_blocks, free_blocks).

    The first six are day 78's decode step; block_tables share the prompt's first ``shared_blocks``
    pages across every sample, as fork left them. ``free_blocks`` (int32) lists free pages: room for
    the naive version's private copies.
    """
    cfg = Config(*cfg)
    rng = np.random.default_rng(seed)
    bm, kc, vc, _, _ = build_samples(cfg, rng)
    samples = range(cfg.num_samples)
    max_blocks = max(len(bm.block_table(s)) for s in samples) + 1  # a spare column of garbage
    tables = rng.integers(-(1 << 30), 1 << 30, size=(cfg.num_samples, max_blocks)).astype(np.int32)
    for s in samples:
        tables[s, :len(bm.block_table(s))] = bm.block_table(s)
    lens = np.array([bm.num_tokens(s) for s in samples], dtype=np.int32)
    used = {b for s in samples for b in bm.block_table(s)}
    free = np.array([b for b in rng.permutation(bm.num_blocks) if b not in used], dtype=np.int32)
    query = rng.standard_normal((cfg.num_samples, cfg.num_heads, cfg.head_dim), dtype=np.float32)
    return query, kc, vc, tables, lens, 1.0 / math.sqrt(cfg.head_dim), cfg.prompt_len // cfg.block_size, free


def reference(query, key_cache, value_cache, block_tables, context_lens, scale, shared_blocks, free_blocks):
    return paged_reference(query, key_cache, value_cache, block_tables, context_lens, scale)


def traffic(query, key_cache, value_cache, block_tables, context_lens, scale, shared_blocks, free_blocks):
    """The minimum: every distinct live K/V page once (the shared prompt once), queries and outputs."""
    tables = block_tables if isinstance(block_tables, np.ndarray) else block_tables.copy_to_host()
    lens = context_lens if isinstance(context_lens, np.ndarray) else context_lens.copy_to_host()
    bs, kv_heads, head_dim = key_cache.shape[1:]
    pages = {int(b) for s in range(len(lens)) for b in tables[s, :math.ceil(int(lens[s]) / bs)]}
    kv_bytes = 2 * len(pages) * bs * kv_heads * head_dim * np.dtype(key_cache.dtype).itemsize
    tokens = int(np.sum(lens))
    return kv_bytes + 2 * query.size * 4, 4 * tokens * query.shape[1] * head_dim


@cuda.jit
def unshare_kernel(block_tables, free_blocks, shared_blocks, new_tables, block_mapping):
    """Thread i owns entry (s, j) of the tables. Samples s >= 1 replace each of their first
    shared_blocks entries by the free page free_blocks[(s - 1) * shared_blocks + j] and write the copy
    (old page, new page) into that row of block_mapping; every other entry is copied unchanged."""
    # block_tables, new_tables: (num_seqs, max_blocks); free_blocks: (>= (num_seqs - 1) * shared,)
    # block_mapping: ((num_seqs - 1) * shared_blocks, 2) of (src, dst). One thread per table entry.
    raise NotImplementedError("Day 82: i = cuda.grid(1); guard; s, j from the table width; new_tables[s, j]; a copy "
                              "row where s > 0, j < shared (14 lines)")


_UNSHARE_SIG = "void(int32[:, ::1], int32[::1], int64, int32[:, ::1], int32[:, ::1])"
_COPY_SIG = "void(uint64[:, ::1], uint64[:, ::1], int32[:, ::1])"
KERNELS = {
    "naive": (unshare_kernel, _UNSHARE_SIG),
    "naive.copy_blocks": (copy_blocks_kernel, _COPY_SIG),
    "naive.attention": PAGED_ATTENTION_KERNELS["optimized"],
    "optimized": PAGED_ATTENTION_KERNELS["optimized"],  # day 78's kernel, unchanged
}


def _check(query, key_cache, value_cache, block_tables, context_lens, scale, shared_blocks, free_blocks):
    check_inputs(query, key_cache, value_cache, block_tables, context_lens, scale)
    launch.check_array("free_blocks", free_blocks, dtype=np.int32, ndim=1)
    if not isinstance(shared_blocks, (int, np.integer)) or isinstance(shared_blocks, bool):
        raise ValueError(f"shared_blocks: expected an int, got {type(shared_blocks).__name__}")
    num_seqs, max_blocks = block_tables.shape
    if not 0 <= shared_blocks <= max_blocks:
        raise ValueError(f"shared_blocks: expected 0..{max_blocks} (table columns), got {shared_blocks}")
    need = (num_seqs - 1) * int(shared_blocks)
    if free_blocks.shape[0] < need:
        raise ValueError(f"free_blocks: copying {shared_blocks} shared blocks for {num_seqs - 1} samples needs "
                         f"{need} free blocks, got {free_blocks.shape[0]}")
    if isinstance(block_tables, np.ndarray) and isinstance(context_lens, np.ndarray) and shared_blocks:
        if np.any(block_tables[:, :shared_blocks] != block_tables[:1, :shared_blocks]):
            raise ValueError(f"block_tables: the first {shared_blocks} entries must be the same in every row")
        if np.any(context_lens < shared_blocks * key_cache.shape[1]):
            raise ValueError("context_lens: every sample must hold at least the shared blocks' tokens")
    if isinstance(free_blocks, np.ndarray) and isinstance(block_tables, np.ndarray) and need:
        cand = free_blocks[:need]
        if cand.min() < 0 or cand.max() >= key_cache.shape[0] or len(set(cand.tolist())) != need:
            raise ValueError(f"free_blocks: the first {need} entries must be distinct blocks of the cache")
        bs = key_cache.shape[1]
        used = {int(b) for s in range(num_seqs) for b in block_tables[s, :math.ceil(int(context_lens[s]) / bs)]}
        if used & set(cand.tolist()):
            raise ValueError("free_blocks: lists a block that a sequence's table uses")


def attend(query, q, key_cache, value_cache, tables, lens, scale):
    """Day 78's optimized PagedAttention on arrays already on the device; the result as ``query`` is."""
    return launch.result(paged_attention(q, key_cache, value_cache, tables, lens, scale), query)


def naive(query, key_cache, value_cache, block_tables, context_lens, scale, shared_blocks, free_blocks):
    """v1: give every sample a private copy of the shared pages, then decode."""
    _check(query, key_cache, value_cache, block_tables, context_lens, scale, shared_blocks, free_blocks)
    q, kc, vc, tables, lens, free = launch.to_device(query, key_cache, value_cache, block_tables,
                                                     context_lens, free_blocks)
    num_seqs = tables.shape[0]
    pairs = (num_seqs - 1) * int(shared_blocks)
    new_tables = launch.empty(tables.shape, np.int32)
    mapping = launch.empty((max(pairs, 1), 2), np.int32)
    unshare_kernel[launch.blocks(tables.size, THREADS), THREADS](tables, free, int(shared_blocks),
                                                                 new_tables, mapping)
    if pairs:
        num_blocks = kc.shape[0]
        keys, values = as_words(kc, num_blocks), as_words(vc, num_blocks)
        threads = min(256, 32 * -(-keys.shape[1] // 32))
        copy_blocks_kernel[(pairs, 2), threads](keys, values, mapping)
    return attend(query, q, kc, vc, new_tables, lens, scale)


def optimized(query, key_cache, value_cache, block_tables, context_lens, scale, shared_blocks, free_blocks):
    """v2: decode straight over the shared pages."""
    raise NotImplementedError("Day 82: validate with _check, then day 78's attention (paged_attention) on the tables "
                              "as they are (2 lines)")


def memory_report(cfg, seed: int = 0) -> dict:
    """Blocks held after forking ``num_samples`` samples and decoding: copy_fork vs fork."""
    cfg = Config(*cfg)
    out = {}
    for how in ("copy_fork", "fork"):
        rng = np.random.default_rng(seed)
        gen = [int(rng.integers(0, cfg.gen_len + 1)) for _ in range(cfg.num_samples)]
        need = cfg.num_samples * math.ceil((cfg.prompt_len + cfg.gen_len) / cfg.block_size)
        bm = SharingBlockManager(need, cfg.block_size)
        bm.allocate(0, cfg.prompt_len)
        for s in range(1, cfg.num_samples):
            getattr(bm, how)(0, s)
        bm.take_copies()
        for s in range(cfg.num_samples):
            for _ in range(gen[s]):
                bm.append_slot(s)
        out[how] = bm.num_used_blocks()
    out["saved_share"] = 1.0 - out["fork"] / out["copy_fork"]
    return out


def library(query, key_cache, value_cache, block_tables, context_lens, scale, shared_blocks, free_blocks):
    """PyTorch's fused attention on a dense copy of each sample's context (day 78's library row)."""
    from solutions.day78_paged_attention_v1 import library as dense_attention

    return dense_attention(query, key_cache, value_cache, block_tables, context_lens, scale)
