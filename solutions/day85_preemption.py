"""Day 85: preemption -- when pages run out, swap a sequence's pages to host memory or recompute them.

A decode step needs one more slot per running sequence. When the pool has no page left, the
scheduler must take pages from somebody: it preempts the newest sequences and gives their pages to
the others. The preempted sequence's K/V are either copied to host memory (swap) and copied back
later, or dropped and recomputed by running its tokens through the model again (recompute).

Host side (graded by its own tests):
  SwappingBlockManager  day 84's PrefixCachingBlockManager plus a second day-75 allocator over
                        ``num_cpu_blocks`` pages of pinned host memory (the swap space):
    swap_out(seq_ids)   -> [(gpu, cpu)]: each distinct page of the group gets one host page, so a page
                        the group shares is copied once; its host ref count is the number of the
                        group's tables holding it. The GPU pages are released (cached prompt pages
                        stay in day 84's cache). Run take_copies() first: an owed copy-on-write
                        copy must land before its page leaves.
    swap_in(seq_ids)    -> [(cpu, gpu)]: the reverse, into fresh GPU pages, sharing kept in the group.
    free(seq_id)        also ends a swapped sequence: its host pages go back.
    Recompute is free(seq) now and allocate_prompt(seq, prompt + generated) later: day 84's cache
    still holds the full prompt pages unless they were evicted, so re-admission mostly hits.
  OutOfBlocksError (day 76) when either pool is short: nothing changes.

The day contract is one preemption round trip: a group of sequences is swapped out, other sequences
take its pages, the group is swapped back into other pages, then every sequence decodes (day 78):
  v1 naive      one DMA per page each way, K and V separately (4 copies per page): each copy pays
                the driver's fixed cost, and a 32 KB page moves in ~0.6 us at ~55 GB/s.
  v2 optimized  swap_blocks_kernel gathers the group's pages into one device staging buffer, one DMA
                moves it to pinned host memory and one brings it back, then the same kernel scatters
                it into the new pages: two link transfers for the whole group.
  library       the same round trip with CuPy: fancy-index gather, one get() into pinned memory.

Napkin math (32 of 64 sequences preempted, 4096 tokens each, 8 KV heads x 128, fp16, pages of 16):
a token's K and V are 4 KB, a page's 64 KB, the group's 8,192 pages 537 MB. Over a ~55 GB/s pinned
host link that is ~9.8 ms each way, ~20 ms for the round trip; the gather and scatter move 537 MB
through HBM twice each, ~0.5 ms at ~4.1 TB/s. v1 issues 32,768 copies; at ~10 us of driver and
Python cost each they take ~0.3 s on their own. Swap or recompute: see recompute_vs_swap.
"""

import math
import time
from typing import NamedTuple

import numpy as np

from course import ON_GPU, cuda, launch
from course.checking import to_host
from solutions.day75_block_allocator import BlockAllocator
from solutions.day76_block_tables import OutOfBlocksError
from solutions.day78_paged_attention_v1 import KERNELS as PAGED_ATTENTION_KERNELS
from solutions.day78_paged_attention_v1 import check_inputs
from solutions.day78_paged_attention_v1 import reference as paged_reference
from solutions.day82_prefix_sharing import attend
from solutions.day84_prefix_caching import PrefixCachingBlockManager, block_hash

TITLE = "Preemption: swap to host memory or recompute"
MEMORY_SPACE = "global"
VERSIONS = ("naive", "optimized")
BOUND = "memory"
RTOL = 5e-4  # float32 softmax sums; a page that came back wrong or not at all is off by far more
ERROR_FLOOR = 1e-2  # attention outputs average many rows towards zero (course.checking: the floor)
THREADS = 256

__all__ = ["OutOfBlocksError", "SwappingBlockManager"]


class SwappingBlockManager(PrefixCachingBlockManager):
    """Day 84's block tables (fork, copy-on-write, prefix cache) with a swap space in host memory."""

    def __init__(self, num_blocks: int, block_size: int, num_cpu_blocks: int, hash_fn=block_hash):
        super().__init__(num_blocks, block_size, hash_fn)
        self.cpu_allocator = BlockAllocator(num_cpu_blocks)
        self._swapped: dict[object, list[int]] = {}  # seq_id -> host page of each logical block
        self._swapped_lens: dict[object, int] = {}

    @property
    def num_free_cpu_blocks(self) -> int:
        return self.cpu_allocator.num_free_blocks

    def cpu_ref_count(self, block: int) -> int:
        return self.cpu_allocator.ref_count(block)

    def is_swapped(self, seq_id) -> bool:
        return seq_id in self._swapped

    def cpu_block_table(self, seq_id) -> list[int]:
        if seq_id not in self._swapped:
            raise KeyError(f"sequence {seq_id!r} is not swapped out")
        return list(self._swapped[seq_id])

    def num_tokens(self, seq_id) -> int:
        if seq_id in self._swapped:
            return self._swapped_lens[seq_id]
        return super().num_tokens(seq_id)

    def _group(self, seq_ids, tables: dict, where: str) -> list:
        ids = list(seq_ids)
        if len(set(ids)) != len(ids):
            raise ValueError(f"a sequence appears twice in {ids!r}")
        for seq_id in ids:
            if seq_id not in tables:
                raise KeyError(f"sequence {seq_id!r} is not {where}")
        return ids

    def swap_out(self, seq_ids) -> list[tuple[int, int]]:
        """Move the group's pages to host pages; returns the (gpu, cpu) copies to run, in order.

        Each distinct page of the group (first seen first) gets one host page from ``self.cpu_allocator``;
        a page several of the group's tables hold is copied once, its host page gaining an owner per
        further holder. The host tables and lengths go to ``self._swapped`` / ``self._swapped_lens`` and
        the GPU tables are released with ``super().free``. OutOfBlocksError, changing nothing, when the
        host pool has too few free pages."""
        # EXERCISE: distinct pages (dict.fromkeys); enough host pages?; one host page each; record; super().free
        ids = self._group(seq_ids, self._tables, "on the GPU")
        pages = list(dict.fromkeys(b for s in ids for b in self._tables[s]))  # distinct, first seen first
        if len(pages) > self.num_free_cpu_blocks:  # check first: a half-swapped group would leak
            raise OutOfBlocksError(f"swapping out {ids!r} needs {len(pages)} host blocks, "
                                   f"{self.num_free_cpu_blocks} are free")
        cpu_of: dict[int, int] = {}
        for s in ids:
            for block in self._tables[s]:
                if block in cpu_of:
                    self.cpu_allocator.incref(cpu_of[block])  # shared in the group: one copy, one more owner
                else:
                    cpu_of[block] = self.cpu_allocator.allocate()
        for s in ids:
            self._swapped[s] = [cpu_of[b] for b in self._tables[s]]
            self._swapped_lens[s] = self._lens[s]
            super().free(s)  # day 76's order, last page first: day 84's LRU invariant holds
        return [(b, cpu_of[b]) for b in pages]

    def swap_in(self, seq_ids) -> list[tuple[int, int]]:
        """Bring the group back into fresh GPU pages; returns the (cpu, gpu) copies to run, in order.

        The mirror of swap_out: one fresh GPU page per distinct host page, sharing kept within the
        group; the tables and lengths come back and the host pages are freed. OutOfBlocksError,
        changing nothing, when the GPU pool has too few free pages."""
        # EXERCISE: the mirror of swap_out: distinct host pages, enough GPU pages?, one fresh page each; free the host
        ids = self._group(seq_ids, self._swapped, "swapped out")
        pages = list(dict.fromkeys(c for s in ids for c in self._swapped[s]))
        if len(pages) > self.num_free_blocks:
            raise OutOfBlocksError(f"swapping in {ids!r} needs {len(pages)} blocks, "
                                   f"{self.num_free_blocks} are free")
        gpu_of: dict[int, int] = {}
        for s in ids:
            for c in self._swapped[s]:
                if c in gpu_of:
                    self.allocator.incref(gpu_of[c])
                else:
                    gpu_of[c] = self.allocator.allocate()  # may evict an unheld cached page, never a held one
        for s in ids:
            host = self._swapped.pop(s)
            self._tables[s] = [gpu_of[c] for c in host]
            self._lens[s] = self._swapped_lens.pop(s)
            for c in reversed(host):
                self.cpu_allocator.free(c)
        return [(c, gpu_of[c]) for c in pages]

    def free(self, seq_id) -> None:
        """End a sequence, running or swapped out (a swapped one gives back its host pages, last first,
        and forgets its host table and length)."""
        # EXERCISE: a swapped sequence frees its host pages and forgets table and length; otherwise super().free
        if seq_id in self._swapped:
            for c in reversed(self._swapped.pop(seq_id)):
                self.cpu_allocator.free(c)
            del self._swapped_lens[seq_id]
            return
        super().free(seq_id)

    def _reject_swapped(self, seq_id) -> None:
        if seq_id in self._swapped:
            raise ValueError(f"sequence {seq_id!r} is swapped out; swap it in or free it first")

    def allocate(self, seq_id, num_tokens: int) -> None:
        self._reject_swapped(seq_id)
        super().allocate(seq_id, num_tokens)

    def allocate_prompt(self, seq_id, token_ids) -> int:
        self._reject_swapped(seq_id)
        return super().allocate_prompt(seq_id, token_ids)

    def _new_child(self, parent_id, child_id) -> list[int]:
        self._reject_swapped(child_id)
        return super()._new_child(parent_id, child_id)


# --- the plan: the manager's rule on arrays --------------------------------------------------------------


class SwapPlan(NamedTuple):
    out_pairs: np.ndarray  # (pages, 2) int32: (gpu page, host page); host pages 0..pages-1 in order
    in_pairs: np.ndarray  # (pages, 2) int32: (host page, new gpu page)
    tables: np.ndarray  # (num_seqs, max_blocks) int32: the tables after the round trip


def _used(block_tables, context_lens, block_size, s) -> np.ndarray:
    return block_tables[s, :math.ceil(int(context_lens[s]) / block_size)]


def plan_swap(block_tables, context_lens, swapped, free_blocks, block_size) -> SwapPlan:
    """SwappingBlockManager's rule for one round trip on a fresh swap space: the group's distinct pages
    in first-seen order go to host pages 0, 1, ...; coming back, host page i lands in free_blocks[i]."""
    pages = list(dict.fromkeys(int(b) for s in swapped for b in _used(block_tables, context_lens, block_size, s)))
    n = len(pages)
    new_pages = np.asarray(free_blocks[:n], dtype=np.int32)
    gpu_of = dict(zip(pages, new_pages.tolist()))
    tables = block_tables.copy()
    for s in swapped:
        k = math.ceil(int(context_lens[s]) / block_size)
        tables[s, :k] = [gpu_of[int(b)] for b in block_tables[s, :k]]
    host = np.arange(n, dtype=np.int32)
    return SwapPlan(np.stack([np.array(pages, dtype=np.int32).reshape(n), host], axis=1),
                    np.stack([host, new_pages], axis=1), tables)


# --- the day contract: swap a group out and back in, then decode ------------------------------------------


class Config(NamedTuple):
    """``num_seqs`` sequences of up to ``context`` tokens; the newest ``num_swapped`` are preempted.
    With ``forks``, sequences come in families of three (a prompt and two forks that decoded a
    little), so the group shares pages among itself and with sequences that stay."""

    num_seqs: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    block_size: int
    context: int
    num_swapped: int
    cache_dtype: str = "float16"
    forks: bool = True


TEST_SIZES = (
    Config(5, 2, 1, 32, 4, 14, 3, "float32"),  # group {2, 3, 4}: 2 shares with 0 and 1, 3 and 4 share
    Config(4, 4, 2, 32, 8, 21, 2, "float16"),  # GQA; the group is the second family's head and a fork
    Config(3, 2, 2, 32, 16, 9, 3, "float16"),  # everything preempted; one page per sequence
    Config(2, 2, 1, 32, 4, 5, 1, "float32", forks=False),  # no sharing at all
)
BENCH_SIZES = (Config(64, 32, 8, 128, 16, 4096, 32, "float16", forks=False),)  # 8,192 pages, 537 MB


def make_inputs(cfg, seed: int = 0):
    """(query, kv_cache, block_tables, context_lens, scale, swapped, free_blocks).

    kv_cache (2, num_blocks, block_size, num_kv_heads, head_dim) as day 75 lays it out; the tables are
    what SwappingBlockManager left after prompts, forks and a few copy-on-write appends; swapped
    (int32) lists the preempted sequences; free_blocks (int32) the pages the swap-in may take, in
    order: pages no table holds (the group's old pages went to other sequences meanwhile). Every
    slot no sequence owns holds NaN, so a page that does not come back poisons the decode.
    """
    cfg = Config(*cfg)
    rng = np.random.default_rng(seed)
    bs, S = cfg.block_size, cfg.num_seqs
    per_seq = math.ceil(cfg.context / bs) + 2
    num_blocks = (S + cfg.num_swapped) * per_seq + 2  # room for every table, then for the swap-in
    bm = SwappingBlockManager(num_blocks, bs, num_cpu_blocks=1)
    for i in range(num_blocks):  # a pool that has seen traffic: free pages come out shuffled
        bm.allocate(("old", i), 1)
    for i in rng.permutation(num_blocks):
        bm.free(("old", int(i)))
    dtype = np.dtype(cfg.cache_dtype)
    kv = np.full((2, num_blocks, bs, cfg.num_kv_heads, cfg.head_dim), np.nan, dtype=dtype)
    rows = kv.reshape(2, num_blocks * bs, cfg.num_kv_heads, cfg.head_dim)

    def fresh(n):
        return rng.standard_normal((2, n, cfg.num_kv_heads, cfg.head_dim), dtype=np.float32).astype(dtype)

    for s in range(S):
        if cfg.forks and s % 3:
            bm.fork(s - 1, s)
            for _ in range(int(rng.integers(0, bs + 2))):  # the first append copies a shared tail page
                slot = bm.append_slot(s)
                for src, dst in bm.take_copies():
                    kv[:, dst] = kv[:, src]
                rows[:, slot] = fresh(1)[:, 0]
        else:
            n = cfg.context if not cfg.forks else int(rng.integers(1, cfg.context + 1))
            bm.allocate(s, n)
            rows[:, bm.slot_mapping(s)] = fresh(n)
    lens = np.array([bm.num_tokens(s) for s in range(S)], dtype=np.int32)
    width = max(len(bm.block_table(s)) for s in range(S)) + 1  # a spare column of garbage
    tables = rng.integers(-(1 << 30), 1 << 30, size=(S, width)).astype(np.int32)
    for s in range(S):
        tables[s, :len(bm.block_table(s))] = bm.block_table(s)
    used = {b for s in range(S) for b in bm.block_table(s)}
    free = np.array([b for b in rng.permutation(num_blocks) if b not in used], dtype=np.int32)
    swapped = np.arange(S - cfg.num_swapped, S, dtype=np.int32)  # the newest go first, as in vLLM
    query = rng.standard_normal((S, cfg.num_heads, cfg.head_dim), dtype=np.float32)
    return query, kv, tables, lens, 1.0 / math.sqrt(cfg.head_dim), swapped, free


def reference(query, kv_cache, block_tables, context_lens, scale, swapped, free_blocks):
    """Plainly: preemption must not change a thing, so decode over the tables as they were."""
    return paged_reference(query, kv_cache[0], kv_cache[1], block_tables, context_lens, scale)


def _page_bytes(kv_cache) -> int:
    return int(np.prod(kv_cache.shape[2:])) * np.dtype(kv_cache.dtype).itemsize  # one page of K (or V)


def traffic(query, kv_cache, block_tables, context_lens, scale, swapped, free_blocks):
    """The minimum through device memory: the group's distinct pages read once going out and written
    once coming back, each distinct live page read once by the decode, queries and outputs. (The host
    link carries the group's pages once each way: swap_report.)"""
    tables, lens, sw = to_host(block_tables), to_host(context_lens), to_host(swapped)
    bs = kv_cache.shape[2]
    group = {int(b) for s in sw for b in _used(tables, lens, bs, s)}
    live = {int(b) for s in range(len(lens)) for b in _used(tables, lens, bs, s)}
    page = 2 * _page_bytes(kv_cache)
    return 2 * len(group) * page + len(live) * page + 2 * query.size * 4, \
        4 * int(np.sum(lens)) * query.shape[1] * query.shape[2]


@cuda.jit
def swap_blocks_kernel(src, dst, mapping):
    """One CUDA block per (pair, K or V): copy page mapping[p, 0] of src[kv] to page mapping[p, 1] of
    dst[kv], the threads striding over its words, four loads in flight before four stores, then the
    remainder."""
    # src: (2, src_pages, page_words); dst: (2, dst_pages, page_words); mapping: (pairs, 2) of
    # (src page, dst page). grid (pairs, 2): blockIdx.y picks K or V.
    # EXERCISE: read the pair's (src, dst) pages once; stride over the page's words, 4 loads before 4 stores
    p = cuda.blockIdx.x
    kv = cuda.blockIdx.y
    s = mapping[p, 0]  # one address for the whole block: a broadcast load
    d = mapping[p, 1]
    words = src.shape[2]
    step = cuda.blockDim.x
    w = cuda.threadIdx.x
    # A page is one contiguous run of 8-byte words in both arrays: the block streams it coalesced,
    # four loads in flight per thread before the first store.
    while w + 3 * step < words:
        a0 = src[kv, s, w]
        a1 = src[kv, s, w + step]
        a2 = src[kv, s, w + 2 * step]
        a3 = src[kv, s, w + 3 * step]
        dst[kv, d, w] = a0
        dst[kv, d, w + step] = a1
        dst[kv, d, w + 2 * step] = a2
        dst[kv, d, w + 3 * step] = a3
        w += 4 * step
    while w < words:
        dst[kv, d, w] = src[kv, s, w]
        w += step


_SWAP_SIG = "void(uint64[:, :, ::1], uint64[:, :, ::1], int32[:, ::1])"
KERNELS = {
    "naive.attention": PAGED_ATTENTION_KERNELS["optimized"],
    "optimized.swap": (swap_blocks_kernel, _SWAP_SIG),
    "optimized.attention": PAGED_ATTENTION_KERNELS["optimized"],
}


def _check(query, kv_cache, block_tables, context_lens, scale, swapped, free_blocks):
    launch.check_array("kv_cache", kv_cache, dtype=(np.float16, np.float32), ndim=5)
    if kv_cache.shape[0] != 2:
        raise ValueError("kv_cache: expected shape (2, num_blocks, block_size, num_kv_heads, head_dim), "
                         f"got {tuple(kv_cache.shape)}")
    check_inputs(query, kv_cache[0], kv_cache[1], block_tables, context_lens, scale)
    launch.check_array("swapped", swapped, dtype=np.int32, ndim=1)
    launch.check_array("free_blocks", free_blocks, dtype=np.int32, ndim=1)
    tables, lens, sw, free = (to_host(a) for a in (block_tables, context_lens, swapped, free_blocks))
    S, bs, num_blocks = len(lens), kv_cache.shape[2], kv_cache.shape[1]
    if sw.size and (sw.min() < 0 or sw.max() >= S or len(set(sw.tolist())) != sw.size):
        raise ValueError(f"swapped: expected distinct sequences in 0..{S - 1}, got {sw.tolist()}")
    if free.size and (free.min() < 0 or free.max() >= num_blocks or len(set(free.tolist())) != free.size):
        raise ValueError(f"free_blocks: expected distinct blocks in 0..{num_blocks - 1}")
    live = {int(b) for s in range(S) for b in _used(tables, lens, bs, s)}
    if live & set(free.tolist()):
        raise ValueError("free_blocks: lists a block that a sequence's table uses")
    group = {int(b) for s in sw for b in _used(tables, lens, bs, s)}
    if len(group) > free.size:
        raise ValueError(f"free_blocks: {free.size} blocks cannot take the group's {len(group)} pages")
    return plan_swap(tables, lens, sw.tolist(), free, bs)


# The swap space: pinned host pages kept from call to call, as an engine keeps its swap space
# (page-locking memory costs milliseconds per hundred MB; it is paid once).
_swap_space: dict = {}


def swap_space(shape, dtype) -> np.ndarray:
    """A page-locked host array of ``shape``, reused while the shape and dtype stay the same."""
    key = (tuple(shape), np.dtype(dtype).str)
    if key not in _swap_space:
        _swap_space.clear()
        _swap_space[key] = cuda.pinned_array(shape, dtype=dtype)
    return _swap_space[key]


def swap_page_by_page(cache_words, host, out_pairs, in_pairs) -> None:
    """v1: one DMA per page and per K/V, out and back: 4 link transfers per page.

    ``cache_words`` (2, num_blocks, page_words) on the device, ``host`` (2, host pages, page_words)
    pinned; out_pairs rows are (gpu page, host page), in_pairs rows (host page, gpu page)."""
    # EXERCISE: per (gpu, cpu) pair and K/V: cache_words[kv, g].copy_to_host(host[kv, c]); then back
    for g, c in out_pairs.tolist():
        for kv in range(2):
            cache_words[kv, g].copy_to_host(host[kv, c])
    for c, g in in_pairs.tolist():
        for kv in range(2):
            cache_words[kv, g].copy_to_device(host[kv, c])


def swap_batched(cache_words, host, out_pairs, in_pairs) -> None:
    """v2: gather into a device staging buffer, one DMA out, one DMA back, scatter.

    The same arguments as swap_page_by_page; host page i is out_pairs' row i."""
    # EXERCISE: staging (2, pairs, page_words); gather by out_pairs; one DMA out, one back; scatter by in_pairs
    pairs, page_words = out_pairs.shape[0], cache_words.shape[2]
    staging = cuda.device_array((2, pairs, page_words), dtype=cache_words.dtype)  # (K/V, pair, page)
    threads = min(THREADS, 32 * -(-page_words // 32))  # no idle warps on small pages
    swap_blocks_kernel[(pairs, 2), threads](cache_words, staging, cuda.to_device(out_pairs))
    staging.copy_to_host(host)  # host page i is staging row i: the whole group in one transfer
    staging.copy_to_device(host)  # later, when pages are free again: one transfer back
    swap_blocks_kernel[(pairs, 2), threads](staging, cache_words, cuda.to_device(in_pairs))


def _step(transfer, query, kv_cache, block_tables, context_lens, scale, swapped, free_blocks):
    plan = _check(query, kv_cache, block_tables, context_lens, scale, swapped, free_blocks)
    q, kv, lens = launch.to_device(query, kv_cache, context_lens)
    num_blocks = kv.shape[1]
    page_elems = int(np.prod(kv.shape[2:]))
    word = launch.word_dtype(page_elems * kv.dtype.itemsize)  # a page is a contiguous run: move it as words
    cache_words = kv.reshape(2, num_blocks, page_elems).view(word)  # (2, num_blocks, page_words)
    pairs = plan.out_pairs.shape[0]
    if pairs:
        host = swap_space((2, pairs, cache_words.shape[2]), word)  # (K/V, host page, page_words)
        transfer(cache_words, host, plan.out_pairs, plan.in_pairs)
    return attend(query, q, kv[0], kv[1], cuda.to_device(plan.tables), lens, scale)


def naive(query, kv_cache, block_tables, context_lens, scale, swapped, free_blocks):
    """v1: swap the group out and back one page (K, then V) at a time, then decode."""
    # EXERCISE: return _step with swap_page_by_page and the seven inputs
    return _step(swap_page_by_page, query, kv_cache, block_tables, context_lens, scale, swapped, free_blocks)


def optimized(query, kv_cache, block_tables, context_lens, scale, swapped, free_blocks):
    """v2: gather, one transfer each way through pinned memory, scatter, then decode."""
    # EXERCISE: return _step with swap_batched and the seven inputs
    return _step(swap_batched, query, kv_cache, block_tables, context_lens, scale, swapped, free_blocks)


def library(query, kv_cache, block_tables, context_lens, scale, swapped, free_blocks):
    """The round trip with CuPy (fancy-index gather, get() into pinned memory, scatter), then day 78."""
    import cupy
    import cupyx

    plan = _check(query, kv_cache, block_tables, context_lens, scale, swapped, free_blocks)
    cache = cupy.asarray(kv_cache)  # (2, num_blocks, block_size, num_kv_heads, head_dim)
    if plan.out_pairs.shape[0]:
        staged = cache[:, cupy.asarray(plan.out_pairs[:, 0])]  # a gather kernel: contiguous pages
        host = cupyx.empty_pinned(staged.shape, dtype=staged.dtype)
        staged.get(out=host)
        cache[:, cupy.asarray(plan.in_pairs[:, 1])] = cupy.asarray(host)
    return attend(query, cupy.asarray(query), cache[0], cache[1], cupy.asarray(plan.tables),
                  cupy.asarray(context_lens), scale)


# --- what preemption costs -----------------------------------------------------------------------------


def swap_report(cfg, seed: int = 0) -> dict:
    """Pages the group holds, bytes over the host link each way, and link transfers per version."""
    xs = make_inputs(cfg, seed)
    plan = _check(*xs)
    pages = int(plan.out_pairs.shape[0])
    page_bytes = 2 * _page_bytes(xs[1])
    naive_pages = sum(math.ceil(int(xs[3][s]) / xs[1].shape[2]) for s in xs[5])
    return {"pages": pages, "pages_without_sharing": naive_pages, "bytes_each_way": pages * page_bytes,
            "transfers": {"naive": 4 * pages, "optimized": 2 if pages else 0}}


class ModelShape(NamedTuple):
    """What recompute and swap depend on: parameters (prefill FLOPs) and the K/V bytes per token."""

    name: str
    params: float
    layers: int
    d_model: int
    kv_heads: int
    head_dim: int

    def kv_bytes_per_token(self, itemsize: int = 2) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * itemsize  # K and V, every layer

    def prefill_flops(self, tokens: int) -> float:
        # 2 FLOPs per parameter per token (the GEMMs), plus causal attention's QK^T and PV:
        # per layer 2 x (tokens^2 / 2) x d_model multiply-adds.
        return 2.0 * self.params * tokens + 2.0 * self.layers * self.d_model * tokens ** 2


LLAMA3_8B = ModelShape("Llama-3-8B", 8.03e9, 32, 4096, 8, 128)  # GQA: 8 KV heads, 128 KB per token
LLAMA2_7B = ModelShape("Llama-2-7B", 6.74e9, 32, 4096, 32, 128)  # full multi-head: 512 KB per token
H200_LINK_GBPS = 55.0  # pinned host <-> device, each direction (day 03's measurement)
H200_FP16_TFLOPS = 790.0  # cuBLAS FP16 GEMM, measured


def swap_vs_recompute_estimate(tokens: int, model: ModelShape = LLAMA3_8B, link_gbps: float = H200_LINK_GBPS,
                               tflops: float = H200_FP16_TFLOPS) -> dict:
    """Napkin math for preempting ``tokens`` tokens: the swap round trip at ``link_gbps`` each way
    against recomputing them (a prefill) at ``tflops``. Times in ms.

    Returns {"model": its name, "tokens", "bytes_each_way", "swap_ms" (out and back in),
    "recompute_ms", "source": "estimate"}."""
    # EXERCISE: bytes = tokens x model.kv_bytes_per_token(); swap: twice over the link; recompute: prefill_flops
    nbytes = tokens * model.kv_bytes_per_token()
    swap_ms = 2 * nbytes / (link_gbps * 1e9) * 1e3  # out, then back in
    recompute_ms = model.prefill_flops(tokens) / (tflops * 1e12) * 1e3
    return {"model": model.name, "tokens": tokens, "bytes_each_way": nbytes, "swap_ms": swap_ms,
            "recompute_ms": recompute_ms, "source": "estimate"}


def recompute_vs_swap(tokens: int = 4096, model: ModelShape = LLAMA3_8B, repeats: int = 5) -> dict:
    """Measured on a GPU: the optimized swap round trip of ``tokens`` tokens of the model's K/V (every
    layer) against a stack of FP16 GEMMs doing the same prefill FLOPs. Without a GPU: the estimate."""
    estimate = swap_vs_recompute_estimate(tokens, model)
    if not ON_GPU:
        return estimate
    import cupy

    bs = 16
    pages = -(-tokens // bs)
    page_shape = (bs, model.layers * model.kv_heads, model.head_dim)  # every layer's page, side by side
    cache = cupy.random.default_rng(0).standard_normal((2, 2 * pages) + page_shape, dtype=cupy.float32)
    cache = cache.astype(cupy.float16)
    words = cuda.as_cuda_array(cache.reshape(2, 2 * pages, -1).view(cupy.uint64))
    out_pairs = np.stack([np.arange(pages), np.arange(pages)], axis=1).astype(np.int32)
    in_pairs = np.stack([np.arange(pages), np.arange(pages, 2 * pages)], axis=1).astype(np.int32)
    host = swap_space((2, pages, words.shape[2]), np.uint64)
    samples = []
    for _ in range(repeats + 1):  # the first round trip warms up
        cuda.synchronize()
        t0 = time.perf_counter()
        swap_batched(words, host, out_pairs, in_pairs)
        cuda.synchronize()
        samples.append((time.perf_counter() - t0) * 1e3)
    swap_ms = float(np.median(samples[1:]))

    # Recompute: the prefill's FLOPs as (tokens x d_model) @ (d_model x d_model) FP16 GEMMs on cuBLAS.
    d = model.d_model
    x = cupy.ones((tokens, d), dtype=cupy.float16)
    w = cupy.full((d, d), 1.0 / d, dtype=cupy.float16)
    gemms = max(1, round(model.prefill_flops(tokens) / (2.0 * tokens * d * d)))
    cupy.matmul(x, w)
    times = []
    for _ in range(repeats):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        for _ in range(gemms):
            cupy.matmul(x, w)
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end))
    return {**estimate, "swap_ms": swap_ms, "recompute_ms": float(np.median(times)), "source": "measured",
            "estimate_swap_ms": estimate["swap_ms"], "estimate_recompute_ms": estimate["recompute_ms"]}
