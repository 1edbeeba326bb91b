"""Day 84: prefix caching -- a prompt's full pages are found by a chain hash and reused, not recomputed.

Requests to one deployment share long prefixes: a system prompt, few-shot examples, the earlier
turns of a conversation. Their K and V are the same every time, because the K/V of token t depends
only on tokens 0..t. Prefix caching keeps every full page after its request ends and hands it to the
next request whose prompt starts with the same tokens.

Host side (graded by its own tests):
  BlockPool  day 75's allocator plus the cache: full pages indexed by their chain hash; a cached
             page no table holds is kept on an LRU list and evicted (least recently used first) only
             when no never-cached page is free. A hit on such a page takes it back off the list.
  PrefixCachingBlockManager  day 83's BlockManager (fork, copy-on-write) plus
    match_prefix(tokens)     the cached pages holding the prompt's leading full blocks. Block j's key
                             is hash(key of block j - 1, its tokens): a page is the same only if its
                             whole prefix is. A hash match is a candidate; the page's stored tokens
                             and parent page must match too, so a collision is a miss, never a
                             wrong page.
    allocate_prompt(seq, tokens)  hits shared (ref counts rise), fresh pages for the rest; the new
                             full pages enter the cache. Returns the number of cached tokens.

The day contract is the prompt step of a batch of requests sharing a system prompt: write each
prompt's K and V into its pages, then the first decode step's attention (day 78) for every request:
  v1 naive      plan_recompute: no cache: every request gets fresh pages for its whole prompt, and
                day 77's reshape_and_cache writes every prompt token (one CUDA block per token).
  v2 optimized  plan_prefix_cache: hit pages are shared, so only the missed pages are written, by
                write_pages_kernel: one CUDA block per page, the page's tokens one contiguous run
                of 8-byte words in the input and in the cache.
new_kv holds every prompt token's K/V (what recomputing would produce); v2 reads only the missed ones.

Napkin math (64 requests, a 2048-token system prompt plus 1-256 own tokens each, 8 KV heads x 128,
fp16, pages of 16): a token's K and V are 4 KB. v1 writes all ~139k prompt tokens: 570 MB read and
570 MB written, ~0.28 ms at ~4.1 TB/s, and holds ~8,700 pages. v2 writes the system prompt once plus
each request's own tokens: ~12k tokens, ~50 MB each way, ~25 us, and holds ~1,100 pages. The model's
prefill that the cache also skips (2 x parameters FLOPs per token) is worth far more: see the lesson.
"""

import math
from collections import OrderedDict
from typing import NamedTuple

import numpy as np

from course import cuda, launch
from course.launch import word_dtype
from solutions.day75_block_allocator import BlockAllocator, NoFreeBlockError
from solutions.day76_block_tables import BlockManager as PlainBlockManager
from solutions.day77_reshape_and_cache import reshape_and_cache_kernel
from solutions.day78_paged_attention_v1 import KERNELS as PAGED_ATTENTION_KERNELS
from solutions.day78_paged_attention_v1 import check_inputs
from solutions.day82_prefix_sharing import attend
from solutions.day83_copy_on_write import BlockManager, OutOfBlocksError

TITLE = "Prefix caching: chain hashes and LRU eviction"
MEMORY_SPACE = "global"
VERSIONS = ("naive", "optimized")
BOUND = "memory"
RTOL = 5e-4  # float32 softmax sums; a page computed under another prefix is off by far more
ERROR_FLOOR = 1e-2  # attention outputs average many rows towards zero (course.checking: the floor)
THREADS = 256

__all__ = ["BlockPool", "OutOfBlocksError", "PrefixCachingBlockManager", "block_hash"]


def block_hash(parent_hash, tokens: tuple) -> int:
    """The key of a full block: its parent block's key and its own tokens.

    Python's tuple hash: fast and 64 bits wide, not collision-proof; lookups check what they find."""
    return hash((parent_hash, tokens))


class BlockPool(BlockAllocator):
    """Day 75's ref-counted allocator that keeps freed full pages as a cache until it needs them."""

    def __init__(self, num_blocks: int):
        super().__init__(num_blocks)
        self._by_hash: dict[int, int] = {}  # chain hash -> cached page
        self._entry: dict[int, tuple] = {}  # cached page -> (hash, parent page or None, tokens)
        self._lru: OrderedDict[int, None] = OrderedDict()  # cached pages no table holds, oldest first

    @property
    def num_free_blocks(self) -> int:
        return len(self._free) + len(self._lru)  # an evictable page is free to whoever needs one

    @property
    def num_cached_blocks(self) -> int:
        return len(self._entry)

    @property
    def num_evictable_blocks(self) -> int:
        return len(self._lru)

    def is_cached(self, block: int) -> bool:
        return block in self._entry

    def lookup(self, h: int, parent, tokens: tuple):
        """The cached page for key ``h`` if it really holds ``tokens`` after ``parent``; else None.

        A hash match is only a candidate: the page's entry (hash, parent page, tokens) must show the same
        parent and the same tokens, so a collision is a miss, never a wrong page."""
        # EXERCISE: self._by_hash.get(h); None if missing; else compare the entry's parent and tokens
        block = self._by_hash.get(h)
        if block is None:
            return None
        _, cached_parent, cached_tokens = self._entry[block]
        # Equal hashes prove nothing: another prefix may share the key. Tokens and parent page decide.
        return block if cached_parent == parent and cached_tokens == tokens else None

    def register(self, block: int, h: int, parent, tokens: tuple) -> bool:
        """Make a full page findable by its key; False when the key is taken (then it stays private)."""
        if h in self._by_hash or block in self._entry:
            return False
        self._by_hash[h] = block
        self._entry[block] = (h, parent, tokens)
        return True

    def allocate(self) -> int:
        """A never-cached free page if there is one, else the least recently used cached page.

        Evicting a page drops its entry and its hash (it is no longer findable) and hands it out with
        ref count 1; NoFreeBlockError when the stack and the LRU list are both empty."""
        # EXERCISE: the stack first (super's allocate); else evict the LRU list's oldest page, ref count 1
        if self._free:
            return super().allocate()
        if not self._lru:
            raise NoFreeBlockError(f"all {self.num_blocks} blocks are in use")
        block, _ = self._lru.popitem(last=False)
        h = self._entry.pop(block)[0]
        del self._by_hash[h]
        self._ref_counts[block] = 1
        return block

    def incref(self, block: int) -> None:
        """One more owner. A cached page nobody held comes off the LRU list: it must not be evicted."""
        # EXERCISE: a ref-0 page on the LRU list comes off it with ref count 1; otherwise super's incref
        self._check(block)
        if self._ref_counts[block] == 0 and block in self._lru:
            del self._lru[block]
            self._ref_counts[block] = 1
            return
        super().incref(block)

    def free(self, block: int) -> None:
        """One owner fewer; at zero a cached page joins the LRU list (newest end), others the stack.

        As day 75's free: ValueError on a double free. A page is cached when it is in ``self._entry``."""
        # EXERCISE: like day 75's free, but at zero a cached page (in self._entry) joins the LRU list's newest end
        self._check(block)
        if self._ref_counts[block] == 0:
            raise ValueError(f"block {block} is already free (double free)")
        self._ref_counts[block] -= 1
        if self._ref_counts[block] == 0:
            if block in self._entry:
                self._lru[block] = None
            else:
                self._free.append(block)


class PrefixCachingBlockManager(BlockManager):
    """Day 83's block tables (fork, copy-on-write) with a prefix cache of full prompt pages.

    Invariant the parent check relies on: every cached page's parent is cached, and a page's ref
    count never exceeds its parent's (a table holding a page holds its whole prefix); day 76's free()
    releases a table last page first, so on the LRU list children are always older than their parent
    and are evicted before it: a cached page's parent id always names the page it was computed after.
    """

    def __init__(self, num_blocks: int, block_size: int, hash_fn=block_hash):
        super().__init__(num_blocks, block_size)
        self.allocator = BlockPool(num_blocks)
        self.hash_fn = hash_fn

    @property
    def num_cached_blocks(self) -> int:
        return self.allocator.num_cached_blocks

    @property
    def num_evictable_blocks(self) -> int:
        return self.allocator.num_evictable_blocks

    def is_cached(self, block: int) -> bool:
        return self.allocator.is_cached(block)

    def _blocks(self, token_ids, n: int):
        """(hash, tokens) of the first ``n`` full blocks, each hash chained on the one before."""
        bs, h = self.block_size, None
        for j in range(n):
            tokens = tuple(token_ids[j * bs:(j + 1) * bs])
            h = self.hash_fn(h, tokens)
            yield h, tokens

    def match_prefix(self, token_ids) -> list[int]:
        """The cached pages holding the prompt's leading full blocks (changes nothing).

        The last token is never a hit: it must run through the model for its logits, and its K/V go
        into a page this sequence owns. So at most (len - 1) // block_size blocks are looked up,
        each with the previous hit as its parent, and the walk stops at the first miss."""
        # EXERCISE: walk self._blocks over (len - 1) // block_size blocks; lookup each after the last hit
        token_ids = [int(t) for t in token_ids]
        hits, parent = [], None
        for h, tokens in self._blocks(token_ids, max(0, (len(token_ids) - 1) // self.block_size)):
            block = self.allocator.lookup(h, parent, tokens)
            if block is None:
                break  # a prefix chain: past the first miss nothing can be a true hit
            hits.append(block)
            parent = block
        return hits

    def allocate_prompt(self, seq_id, token_ids) -> int:
        """Pages for a new sequence's prompt, cached ones shared; returns the tokens already cached.

        ValueError if the sequence has a table. The hits gain an owner (a hit with ref count 0 comes
        off the LRU list, so it leaves the free count too), fresh pages hold the rest, and the new full
        pages are registered, each chained on its parent, until one cannot be. OutOfBlocksError,
        changing nothing, when fresh pages plus revived hits exceed the free count."""
        # EXERCISE: hits = match_prefix; fresh + revived must fit; incref hits, allocate, register new full pages
        if seq_id in self._tables:
            raise ValueError(f"sequence {seq_id!r} already has a block table")
        token_ids = [int(t) for t in token_ids]
        hits = self.match_prefix(token_ids)
        fresh = self.blocks_for(len(token_ids)) - len(hits)
        revived = sum(1 for b in hits if self.allocator.ref_count(b) == 0)  # they leave the free count
        if fresh + revived > self.num_free_blocks:
            raise OutOfBlocksError(f"sequence {seq_id!r} needs {fresh} new blocks and {revived} cached ones, "
                                   f"{self.num_free_blocks} are free")
        for block in hits:  # off the LRU list before any allocation below can evict them
            self.allocator.incref(block)
        table = hits + [self.allocator.allocate() for _ in range(fresh)]
        parent = hits[-1] if hits else None
        full = len(token_ids) // self.block_size
        for j, (h, tokens) in enumerate(self._blocks(token_ids, full)):
            if j < len(hits):
                continue
            if not self.allocator.register(table[j], h, parent, tokens):
                break  # a page whose parent is not cached must not be cached either
            parent = table[j]
        self._tables[seq_id] = table
        self._lens[seq_id] = len(token_ids)
        return len(hits) * self.block_size


# --- the plans: pages per request and which pages this step must write --------------------------------


class Plan(NamedTuple):
    tables: np.ndarray  # (num_seqs, max_blocks) int32
    lens: np.ndarray  # (num_seqs,) int32
    writes: np.ndarray  # (pages, 3) int32: (first token in new_kv, page, tokens) of each page to write
    slots: np.ndarray  # (num_tokens,) int64: every token's slot, -1 where it is not written
    blocks_used: int


def _finish(manager, prompts, written) -> Plan:
    bs, S = manager.block_size, len(prompts)
    tables = np.zeros((S, max(1, max(manager.blocks_for(len(p)) for p in prompts))), dtype=np.int32)
    writes, slots, start = [], [], 0
    for s, p in enumerate(prompts):
        table = manager.block_table(s)
        tables[s, :len(table)] = table
        for j in range(written[s] // bs, len(table)):
            n = min(bs, len(p) - j * bs)
            writes.append((start + j * bs, table[j], n))
        slot = np.full(len(p), -1, dtype=np.int64)
        t = np.arange(written[s], len(p))
        slot[written[s]:] = np.asarray(table, dtype=np.int64)[t // bs] * bs + t % bs
        slots.append(slot)
        start += len(p)
    lens = np.array([len(p) for p in prompts], dtype=np.int32)
    return Plan(tables, lens, np.array(writes, dtype=np.int32).reshape(-1, 3), np.concatenate(slots),
                manager.num_blocks - manager.num_free_blocks)


def plan_recompute(prompts, num_blocks: int, block_size: int) -> Plan:
    """v1: no cache: every request gets fresh pages for its whole prompt and writes every token."""
    # EXERCISE: a day 76 BlockManager; allocate every prompt whole; return _finish with 0 cached tokens each
    bm = PlainBlockManager(num_blocks, block_size)
    for s, p in enumerate(prompts):
        bm.allocate(s, len(p))
    return _finish(bm, prompts, [0] * len(prompts))


def plan_prefix_cache(prompts, num_blocks: int, block_size: int) -> Plan:
    """v2: requests in order through one prefix cache; only pages no earlier request wrote are written."""
    # EXERCISE: a PrefixCachingBlockManager; allocate_prompt each prompt in order; _finish with the cached tokens
    bm = PrefixCachingBlockManager(num_blocks, block_size)
    cached = [bm.allocate_prompt(s, p) for s, p in enumerate(prompts)]
    return _finish(bm, prompts, cached)


# --- the day contract: one prompt step of a batch, then the first decode step's attention -----------------


class Config(NamedTuple):
    """``num_seqs`` requests; most are a ``system_len``-token system prompt plus 1..``user_len`` own
    tokens. With three or more, request 0 changes the system prompt's first token and request 2 is
    request 0 with the real first token: its later pages equal request 0's token for token but follow
    another first page (a hash without the parent finds request 0's pages; their K/V are wrong for
    request 2). Request 3 repeats request 1: every page but the last one hits."""

    num_seqs: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    block_size: int
    system_len: int
    user_len: int
    cache_dtype: str = "float16"


TEST_SIZES = (
    Config(5, 2, 1, 32, 4, 10, 6, "float32"),  # the system prompt ends mid-page
    Config(4, 2, 2, 32, 8, 16, 9, "float16"),  # ... on a page boundary
    Config(3, 2, 1, 32, 4, 3, 5, "float16"),  # shorter than a page: nothing to share
    Config(1, 2, 1, 32, 4, 7, 2, "float32"),  # one request
)
BENCH_SIZES = (Config(64, 32, 8, 128, 16, 2048, 256, "float16"),)


def make_prompts(cfg, rng) -> tuple:
    """Token ids (tuples of ints: a scheduler's host data) for one batch of ``cfg``."""
    cfg = Config(*cfg)
    vocab = 32000
    system = rng.integers(1, vocab, cfg.system_len).tolist()
    prompts = []
    for s in range(cfg.num_seqs):
        own = rng.integers(1, vocab, int(rng.integers(1, cfg.user_len + 1))).tolist()
        if s == 0 and cfg.num_seqs >= 3:  # another first token: every later page differs only in prefix
            prompts.append([system[0] % (vocab - 1) + 1] + system[1:] + own if system else own)
        elif s == 2:  # request 0's tokens after the real system prompt: its pages' twins, other prefix
            prompts.append(system + prompts[0][len(system):])
        elif s == 3:  # request 1 again: every page but the last one hits
            prompts.append(list(prompts[1]))
        else:
            prompts.append(system + own)
    return tuple(tuple(p) for p in prompts)


def model_kv(prompts, num_kv_heads: int, head_dim: int, dtype, seed: int) -> np.ndarray:
    """(2, num_tokens, num_kv_heads, head_dim): a stand-in for the model's K and V of every prompt token.

    As in a transformer, token t's K/V depend on tokens 0..t (here through a rolling hash of the
    prefix), so equal prefixes give equal K/V and a page computed after other tokens is wrong."""
    freq = np.random.default_rng(seed).uniform(20.0, 200.0, size=(2, num_kv_heads * head_dim))
    phase = np.random.default_rng(seed + 1).uniform(0.0, 2 * np.pi, size=(2, num_kv_heads * head_dim))
    states = []
    for p in prompts:
        h = 1469598103934665603
        for tok in p:
            h = (h * 1099511628211 + tok + 1) % (1 << 61)
            states.append(h / (1 << 61))
    u = np.array(states, dtype=np.float64)
    out = np.empty((2, len(u), num_kv_heads * head_dim), dtype=dtype)
    for c in range(2):
        for i in range(0, len(u), 4096):
            out[c, i:i + 4096] = np.sin(u[i:i + 4096, None] * freq[c] * 1000.0 + phase[c])
    return out.reshape(2, len(u), num_kv_heads, head_dim)


def make_inputs(cfg, seed: int = 0):
    """(query, kv_cache, new_kv, prompts, scale).

    prompts: a tuple of token-id tuples, one per request. new_kv (2, num_tokens, num_kv_heads,
    head_dim): every prompt token's K/V, the prompts one after another. kv_cache (2, num_blocks,
    block_size, num_kv_heads, head_dim): a pool large enough for v1, every slot NaN. query
    (num_seqs, num_heads, head_dim) float32: each request's last prompt token's query.
    """
    cfg = Config(*cfg)
    rng = np.random.default_rng(seed)
    prompts = make_prompts(cfg, rng)
    dtype = np.dtype(cfg.cache_dtype)
    new_kv = model_kv(prompts, cfg.num_kv_heads, cfg.head_dim, dtype, seed)
    num_blocks = sum(math.ceil(len(p) / cfg.block_size) for p in prompts) + 2
    kv_cache = np.full((2, num_blocks, cfg.block_size, cfg.num_kv_heads, cfg.head_dim), np.nan, dtype=dtype)
    query = rng.standard_normal((cfg.num_seqs, cfg.num_heads, cfg.head_dim), dtype=np.float32)
    return query, kv_cache, new_kv, prompts, 1.0 / math.sqrt(cfg.head_dim)


def reference(query, kv_cache, new_kv, prompts, scale):
    """Plainly: each request attends over its own prompt's rows of new_kv, float64 softmax."""
    num_heads, kv_heads = query.shape[1], new_kv.shape[2]
    group = num_heads // kv_heads
    out = np.empty(query.shape, dtype=np.float32)
    start = 0
    for s, p in enumerate(prompts):
        k = new_kv[0, start:start + len(p)].astype(np.float64)  # (ctx, kv_heads, dim)
        v = new_kv[1, start:start + len(p)].astype(np.float64)
        for h in range(num_heads):
            logits = scale * (k[:, h // group] @ query[s, h].astype(np.float64))
            w = np.exp(logits - logits.max())
            out[s, h] = (w / w.sum()) @ v[:, h // group]
        start += len(p)
    return out


def traffic(query, kv_cache, new_kv, prompts, scale):
    """The minimum: each distinct page written once from new_kv (read and write), each distinct page
    read once by the decode, queries and outputs; the attention's FLOPs."""
    plan = plan_prefix_cache(prompts, kv_cache.shape[1], kv_cache.shape[2])
    token_bytes = 2 * int(np.prod(kv_cache.shape[3:])) * np.dtype(kv_cache.dtype).itemsize
    page_bytes = kv_cache.shape[2] * token_bytes
    written = int(plan.writes[:, 2].sum()) if plan.writes.size else 0
    tokens = sum(len(p) for p in prompts)
    return 2 * written * token_bytes + plan.blocks_used * page_bytes + 2 * query.size * 4, \
        4 * tokens * query.shape[1] * query.shape[2]


@cuda.jit
def write_pages_kernel(new_words, cache_words, writes, row_words):
    """One CUDA block per (page, K or V): row p of ``writes`` is (first token in new_kv, page, tokens);
    the page's tokens are writes[p, 2] * row_words consecutive words from word writes[p, 0] * row_words
    of new_words[kv], copied to the start of cache_words[kv, page]. The threads stride over the words,
    four loads in flight before four stores, then the tail."""
    # new_words: (2, num_tokens * row_words); cache_words: (2, num_blocks, page_words)
    # writes: (pages, 3) of (first token, page, tokens); grid (pages, 2), blockIdx.y picks K or V.
    # EXERCISE: p, kv from the block; src, page, words from writes[p]; stride over the words, 4 loads, 4 stores
    p = cuda.blockIdx.x
    kv = cuda.blockIdx.y
    # One address for the whole block: three broadcast loads, then no index math per word.
    src = writes[p, 0] * row_words
    page = writes[p, 1]
    words = writes[p, 2] * row_words  # a prompt's last page may be partly filled
    step = cuda.blockDim.x
    w = cuda.threadIdx.x
    # A page of consecutive tokens is one run of words in new_kv and in the cache: a coalesced copy
    # with four loads in flight per thread before the first store.
    while w + 3 * step < words:
        a0 = new_words[kv, src + w]
        a1 = new_words[kv, src + w + step]
        a2 = new_words[kv, src + w + 2 * step]
        a3 = new_words[kv, src + w + 3 * step]
        cache_words[kv, page, w] = a0
        cache_words[kv, page, w + step] = a1
        cache_words[kv, page, w + 2 * step] = a2
        cache_words[kv, page, w + 3 * step] = a3
        w += 4 * step
    while w < words:
        cache_words[kv, page, w] = new_words[kv, src + w]
        w += step


_TOKEN_SIG = "void(uint64[:, ::1], uint64[:, ::1], uint64[:, :, ::1], int64[::1])"
_PAGE_SIG = "void(uint64[:, ::1], uint64[:, :, ::1], int32[:, ::1], int64)"
KERNELS = {
    "naive.write": (reshape_and_cache_kernel, _TOKEN_SIG),
    "naive.attention": PAGED_ATTENTION_KERNELS["optimized"],
    "optimized.write": (write_pages_kernel, _PAGE_SIG),
    "optimized.attention": PAGED_ATTENTION_KERNELS["optimized"],
}


def _check(query, kv_cache, new_kv, prompts, scale) -> int:
    launch.check_array("kv_cache", kv_cache, dtype=(np.float16, np.float32), ndim=5)
    if kv_cache.shape[0] != 2:
        raise ValueError("kv_cache: expected shape (2, num_blocks, block_size, num_kv_heads, head_dim), "
                         f"got {tuple(kv_cache.shape)}")
    if not isinstance(prompts, tuple) or not prompts or not all(isinstance(p, tuple) and p for p in prompts):
        raise ValueError("prompts: expected a non-empty tuple of non-empty tuples of token ids")
    S, tokens = len(prompts), sum(len(p) for p in prompts)
    launch.check_array("new_kv", new_kv, dtype=kv_cache.dtype, shape=(2, tokens) + tuple(kv_cache.shape[3:]))
    bs = kv_cache.shape[2]
    # The decode step's own checks (shapes, heads, scale), on a table just wide enough for the prompts.
    width = max(math.ceil(len(p) / bs) for p in prompts)
    check_inputs(query, kv_cache[0], kv_cache[1], np.zeros((S, width), np.int32),
                 np.array([len(p) for p in prompts], dtype=np.int32), scale)
    need = sum(math.ceil(len(p) / bs) for p in prompts)
    if need > kv_cache.shape[1]:
        raise ValueError(f"kv_cache: {kv_cache.shape[1]} blocks cannot hold the prompts' {need} pages")
    return tokens


# The bench repeats one step: its bookkeeping (graded by the manager's own tests) is computed once and
# kept with its device copies, so the CUDA events time the GPU's work. The memo holds the prompts
# object itself: its id cannot be reused while the entry lives, and tuples cannot change.
_memo: dict = {}


def _plan_on_device(planner, prompts, num_blocks, block_size):
    key = (planner.__name__, id(prompts), num_blocks, block_size)
    hit = _memo.get(key)
    if hit is not None and hit[0] is prompts:
        return hit[1]
    plan = planner(prompts, num_blocks, block_size)
    dev = (plan, *(cuda.to_device(a) for a in (plan.tables, plan.lens, plan.writes, plan.slots)))
    if len(_memo) >= 4:
        _memo.clear()
    _memo[key] = (prompts, dev)
    return dev


def _step(planner, query, kv_cache, new_kv, prompts, scale, write):
    tokens = _check(query, kv_cache, new_kv, prompts, scale)
    _, num_blocks, bs = kv_cache.shape[:3]
    plan, tables, lens, writes, slots = _plan_on_device(planner, prompts, num_blocks, bs)
    q, kv, new = launch.to_device(query, kv_cache, new_kv)
    row = int(np.prod(kv.shape[3:]))
    word = word_dtype(row * kv.dtype.itemsize)  # a token's row is contiguous: move it as words
    new_words = new.reshape(2, tokens, row).view(word)  # (2, num_tokens, row_words)
    write(plan, kv.reshape(2, num_blocks, bs * row).view(word), new_words, writes, slots)
    return attend(query, q, kv[0], kv[1], tables, lens, scale)


def _write_every_token(plan, page_words, new_words, writes, slots):
    num_blocks, row_words = page_words.shape[1], new_words.shape[2]
    cache_words = page_words.reshape(2, page_words.shape[2] // row_words * num_blocks, row_words)
    threads = max(32, min(128, 32 * -(-row_words // 64)))  # day 77's shape: two words per thread
    reshape_and_cache_kernel[new_words.shape[1], threads](new_words[0], new_words[1], cache_words, slots)


def _write_missed_pages(plan, page_words, new_words, writes, slots):
    if not plan.writes.size:
        return
    row_words = new_words.shape[2]
    flat = new_words.reshape(2, new_words.shape[1] * row_words)  # (2, num_tokens * row_words)
    threads = min(THREADS, 32 * -(-page_words.shape[2] // 32))  # no idle warps on small pages
    write_pages_kernel[(plan.writes.shape[0], 2), threads](flat, page_words, writes, row_words)


def naive(query, kv_cache, new_kv, prompts, scale):
    """v1: recompute every prompt: fresh pages for all of it, every token written."""
    # EXERCISE: return _step with plan_recompute, the inputs and _write_every_token
    return _step(plan_recompute, query, kv_cache, new_kv, prompts, scale, _write_every_token)


def optimized(query, kv_cache, new_kv, prompts, scale):
    """v2: prefix caching: hit pages shared, only the missed pages written."""
    # EXERCISE: return _step with plan_prefix_cache, the inputs and _write_missed_pages
    return _step(plan_prefix_cache, query, kv_cache, new_kv, prompts, scale, _write_missed_pages)


def cache_report(cfg, seed: int = 0) -> dict:
    """Tokens written and pages held by each plan for one batch of ``cfg``."""
    cfg = Config(*cfg)
    prompts = make_prompts(cfg, np.random.default_rng(seed))
    num_blocks = sum(math.ceil(len(p) / cfg.block_size) for p in prompts) + 2
    out = {}
    for name, planner in (("naive", plan_recompute), ("optimized", plan_prefix_cache)):
        plan = planner(prompts, num_blocks, cfg.block_size)
        out[name] = {"tokens_written": int((plan.slots >= 0).sum()), "blocks_used": plan.blocks_used}
    out["tokens"] = sum(len(p) for p in prompts)
    return out
