"""Day 84 grader: the prefix cache (chain-hash hits, collisions as misses, LRU eviction, checked against a
model after every step) and one prompt step of a batch: every token written (naive) or only the missed
pages (optimized), then the first decode step's attention."""

import re

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from course.grading import Grader

g = Grader(84)
M = g.target
sol = g.solution
Config = sol.Config
RTOL = sol.RTOL

test_matches_reference = g.matches_reference(rtol=RTOL)


def _replace(xs, i, value):
    return xs[:i] + (value,) + xs[i + 1:]


test_rejects_bad_inputs = g.rejects_bad_inputs(
    Config(3, 2, 1, 32, 4, 6, 3, "float32"),
    extra_cases={
        "prompts-as-list": lambda xs: _replace(xs, 3, list(xs[3])),
        "prompt-empty": lambda xs: _replace(xs, 3, xs[3][:-1] + ((),)),
        "prompts-fewer-than-queries": lambda xs: _replace(xs, 3, xs[3][:-1]),
        "new-kv-one-token-short": lambda xs: _replace(xs, 2, np.ascontiguousarray(xs[2][:, :-1])),
        "cache-too-small": lambda xs: _replace(xs, 1, np.ascontiguousarray(xs[1][:, :2])),
        "cache-not-kv-pair": lambda xs: _replace(xs, 1, np.ascontiguousarray(xs[1][:1])),
        "new-kv-dtype-differs": lambda xs: _replace(xs, 2, xs[2].astype(np.float16)),
    },
)


def test_kernels_write_words_and_attend_with_warps():
    """Both writes move 8-byte words with no local memory; both decode with day 78's warp kernel."""
    for version in sol.VERSIONS:
        write, attn = g.report(f"{version}.write"), g.report(f"{version}.attention")
        assert re.search(r"^\s*ld\.(?:global\.)?[ub]64\s", write.ptx, flags=re.M), f"{version}: no 64-bit loads"
        assert attn.count("shfl.sync") > 0 and attn.count("bar.sync") > 0, "expected day 78's warp kernel"
        for rep in (write, attn):
            assert rep.stack_bytes == 0, f"{rep.name}: {rep.stack_bytes} B of local memory"


def test_cache_writes_each_shared_page_once():
    """The bench's batch: the system prompt's pages written once, then only each request's own pages."""
    g.require_implemented("optimized")
    cfg = Config(8, 2, 1, 32, 16, 100, 20)
    got = M.cache_report(cfg, seed=2)
    prompts = sol.make_prompts(cfg, np.random.default_rng(2))
    assert got["naive"]["tokens_written"] == got["tokens"] == sum(len(p) for p in prompts)
    # Expected by hand: a request's page is written unless an earlier request holds the same prefix
    # through that page (the last page of a prompt is always its own: its last token must run).
    seen, written, pages = set(), 0, 0
    for p in prompts:
        full = (len(p) - 1) // 16
        j = 0
        while j < full and tuple(p[:16 * (j + 1)]) in seen:
            j += 1
        written += len(p) - 16 * j
        pages += -(-len(p) // 16) - j
        seen.update(tuple(p[:16 * (k + 1)]) for k in range(len(p) // 16))
    assert got["optimized"] == {"tokens_written": written, "blocks_used": pages}, (got, written, pages)


# --- the manager -------------------------------------------------------------------------------------------


def test_second_request_allocates_only_its_own_blocks():
    bm = M.PrefixCachingBlockManager(num_blocks=12, block_size=4)
    system = list(range(100, 110))  # two full pages and two tokens
    assert bm.allocate_prompt("a", system + [1, 2, 3]) == 0, "an empty cache has no hits"
    a = bm.block_table("a")
    free = bm.num_free_blocks
    assert bm.allocate_prompt("b", system + [7, 8, 9, 10, 11]) == 8, "the two full system pages hit"
    b = bm.block_table("b")
    assert b[:2] == a[:2] and not set(b[2:]) & set(a), "only the system prompt's full pages are shared"
    assert free - bm.num_free_blocks == len(b) - 2, "b allocates only its non-shared pages"
    assert bm.ref_count(a[0]) == bm.ref_count(a[1]) == 2 and bm.ref_count(a[2]) == 1
    bm.free("a")
    bm.free("b")
    assert bm.num_free_blocks == 12 and all(bm.ref_count(x) == 0 for x in range(12))
    assert bm.allocate_prompt("c", system + [1, 2, 3]) == 12, "freed pages stay cached: a's three full pages"
    assert bm.block_table("c")[:3] == a[:3]


def test_last_token_is_never_a_hit():
    bm = M.PrefixCachingBlockManager(num_blocks=8, block_size=4)
    prompt = list(range(8))
    bm.allocate_prompt("a", prompt)
    bm.free("a")
    assert len(bm.match_prefix(prompt)) == 1, "two full pages, but only the first may be a hit"
    assert bm.allocate_prompt("b", prompt) == 4, "the page holding the last token is computed again"


def test_chain_hash_tells_prefixes_apart():
    """[P][X] and [Q][X]: the page after P and the page after Q hold equal tokens but different K/V."""
    bm = M.PrefixCachingBlockManager(num_blocks=16, block_size=2)
    P, Q, X = [1, 2], [3, 4], [5, 6]
    bm.allocate_prompt("px", P + X + [9])
    bm.allocate_prompt("qx", Q + X + [9])
    px, qx = bm.block_table("px"), bm.block_table("qx")
    assert px[1] != qx[1]
    bm.allocate_prompt("qx2", Q + X + [8])
    bm.allocate_prompt("px2", P + X + [8])
    assert bm.block_table("qx2")[:2] == qx[:2], "the second [Q][X] must hit both of [Q][X]'s pages"
    assert bm.block_table("px2")[:2] == px[:2], "the second [P][X] must hit both of [P][X]'s pages"


def test_hash_collisions_are_misses():
    """A hash that maps everything to 0: nothing is ever shared wrongly; the first chain still hits."""
    bm = M.PrefixCachingBlockManager(num_blocks=16, block_size=2, hash_fn=lambda parent, tokens: 0)
    bm.allocate_prompt("a", [1, 2, 3, 4, 5])
    assert bm.allocate_prompt("b", [3, 4, 3, 4, 5]) == 0, "b's first page only collides with a's"
    assert bm.allocate_prompt("c", [1, 2, 9, 9, 5]) == 2, "the one cached page (key 0) is a's first"
    assert bm.allocate_prompt("d", [1, 2, 3, 4, 5]) == 2, "a's second page could not be cached: key taken"


def test_eviction_is_least_recently_used_and_spares_held_pages():
    bm = M.PrefixCachingBlockManager(num_blocks=4, block_size=2)
    bm.allocate_prompt("a", [1, 2, 0])  # pages: [1 2] cached, [0] private
    bm.allocate_prompt("b", [3, 4, 0])
    a, b = bm.block_table("a"), bm.block_table("b")
    bm.free("a")
    bm.free("b")  # LRU, oldest first: a's [1 2], then b's [3 4]; the private pages went back to the stack
    assert bm.num_evictable_blocks == 2 and bm.num_free_blocks == 4
    bm.allocate_prompt("c", [3, 4, 7])  # hits b's page, which leaves the LRU list
    assert bm.block_table("c")[0] == b[0] and bm.num_evictable_blocks == 1
    bm.allocate("d", 4)  # two pages: the free private page first, then evict a's [1 2], never c's page
    assert a[0] in bm.block_table("d") and b[0] not in bm.block_table("d")
    assert not bm.is_cached(a[0]) and bm.match_prefix([1, 2, 0]) == [], "an evicted page is no longer found"
    with pytest.raises(M.OutOfBlocksError):
        bm.allocate("e", 1)
    assert bm.ref_count(b[0]) == 1 and bm.is_cached(b[0])


# --- the manager against a model, after every step -------------------------------------------------------

# Prompts from a few shared stems plus a random tail, so hits, twins after other stems and re-requests
# of freed prefixes are common.
STEMS = ((), (0, 0, 1, 1), (1, 0, 1, 1, 2, 0), (2, 0, 1, 1))
PROMPT = st.tuples(st.sampled_from(STEMS), st.lists(st.integers(0, 2), max_size=4)).map(
    lambda t: list(t[0]) + t[1])
STEP = st.tuples(st.sampled_from(["prompt", "prompt", "prompt", "append", "append", "fork", "free", "free"]),
                 st.integers(0, 3), st.integers(0, 3), PROMPT)


def _state(bm, model):
    return bm.num_free_blocks, bm.num_cached_blocks, {s: (bm.block_table(s), bm.num_tokens(s)) for s in model}


def _expect_failure(bm, model, error, method, *args):
    before = _state(bm, model)
    with pytest.raises(error):
        getattr(bm, method)(*args)
    assert _state(bm, model) == before, f"{getattr(error, '__name__', error)} changed the manager"


class Model:
    """What the cache must do: prefixes -> pages, an LRU of cached pages no table holds."""

    def __init__(self, num_blocks, block_size):
        self.bs, self.plain_free = block_size, num_blocks
        self.cache = {}  # full prefix (tuple) -> page
        self.lru = []  # cached pages no table holds, oldest first
        self.content = {}  # page -> the prefix whose K/V it holds (full prompt pages only)

    def take(self, n):
        """n fresh pages: never-cached ones first, then evict the oldest."""
        use = min(n, self.plain_free)
        self.plain_free -= use
        for _ in range(n - use):
            page = self.lru.pop(0)
            del self.cache[next(k for k, v in self.cache.items() if v == page)]

    def hits(self, prompt):
        out = []
        for j in range(max(0, (len(prompt) - 1) // self.bs)):
            page = self.cache.get(tuple(prompt[:self.bs * (j + 1)]))
            if page is None:
                break
            out.append(page)
        return out

    def release(self, table, refs_after):
        for page in reversed(table):
            refs_after[page] -= 1
            if refs_after[page] == 0:
                if page in self.cache.values():
                    self.lru.append(page)
                else:
                    self.plain_free += 1


def _refs(bm, seqs):
    refs = {}
    for s in seqs:
        for b in bm.block_table(s):
            refs[b] = refs.get(b, 0) + 1
    return refs


def _check_invariants(bm, model, seqs, num_blocks):
    refs = _refs(bm, seqs)
    for b in range(num_blocks):
        assert bm.ref_count(b) == refs.get(b, 0), f"block {b}: ref count {bm.ref_count(b)}, {refs.get(b, 0)} tables"
    evictable = [b for b in model.cache.values() if b not in refs]
    assert sorted(evictable) == sorted(model.lru), "cached pages no table holds must be exactly the LRU list"
    assert bm.num_cached_blocks == len(model.cache), "cached pages: manager and model disagree"
    assert bm.num_evictable_blocks == len(model.lru)
    assert bm.num_free_blocks == model.plain_free + len(model.lru), "free pages: manager and model disagree"
    assert bm.num_free_blocks + len(refs) == num_blocks, "free + owned != total: a block leaked"


# No shrinking: a failing run of 20+ steps shrinks for minutes; the first failure is printed as found.
@settings(max_examples=80, deadline=None, phases=(Phase.explicit, Phase.reuse, Phase.generate))
@given(num_blocks=st.integers(1, 12), block_size=st.integers(1, 3), steps=st.lists(STEP, min_size=20, max_size=60))
def test_prefix_cache_matches_model(num_blocks, block_size, steps):
    bm = M.PrefixCachingBlockManager(num_blocks, block_size)
    model = Model(num_blocks, block_size)
    seqs = {}  # seq_id -> tokens
    for op, a, b, prompt in steps:
        free = bm.num_free_blocks
        if op == "prompt":
            if a in seqs:
                _expect_failure(bm, seqs, ValueError, "allocate_prompt", a, prompt)
                continue
            hits = model.hits(prompt)
            refs = _refs(bm, seqs)
            fresh = -(-len(prompt) // block_size) - len(hits)
            if fresh + sum(1 for p in hits if p not in refs) > free:
                _expect_failure(bm, seqs, M.OutOfBlocksError, "allocate_prompt", a, prompt)
                continue
            for p in hits:
                if p not in refs:
                    model.lru.remove(p)
            model.take(fresh)
            cached = bm.allocate_prompt(a, prompt)
            table = bm.block_table(a)
            assert cached == len(hits) * block_size and table[:len(hits)] == hits, \
                f"prompt {prompt}: expected hits {hits}, got table {table} with {cached} cached tokens"
            for j, page in enumerate(table[:len(prompt) // block_size]):
                key = tuple(prompt[:block_size * (j + 1)])
                if j < len(hits):
                    assert model.content[page] == key, f"page {page} holds {model.content[page]}, not {key}"
                    continue
                model.content[page] = key
                if key in model.cache:
                    break
                model.cache[key] = page
            seqs[a] = len(prompt)
        elif op == "append":
            if a not in seqs:
                _expect_failure(bm, seqs, KeyError, "append_slot", a)
                continue
            table = bm.block_table(a)
            j = seqs[a] // block_size
            shared = j < len(table) and bm.ref_count(table[j]) > 1
            if (j == len(table) or shared) and free == 0:
                _expect_failure(bm, seqs, M.OutOfBlocksError, "append_slot", a)
                continue
            if j == len(table) or shared:
                model.take(1)
            page = bm.append_slot(a) // block_size
            bm.take_copies()
            assert bm.ref_count(page) == 1 and not bm.is_cached(page), "a token was written into a shared page"
            model.content.pop(page, None)
            seqs[a] += 1
        elif op == "fork":
            if a not in seqs or b in seqs:
                _expect_failure(bm, seqs, (KeyError, ValueError), "fork", a, b)
                continue
            bm.fork(a, b)
            seqs[b] = seqs[a]
        else:
            if a not in seqs:
                _expect_failure(bm, seqs, KeyError, "free", a)
                continue
            table = bm.block_table(a)
            refs = _refs(bm, seqs)
            bm.free(a)
            del seqs[a]
            model.release(table, refs)
        _check_invariants(bm, model, seqs, num_blocks)
    for s in list(seqs):
        bm.free(s)
    assert bm.num_free_blocks == num_blocks and all(bm.ref_count(b) == 0 for b in range(num_blocks))


@settings(max_examples=40, deadline=None)
@given(block_size=st.integers(1, 3), prompts=st.lists(PROMPT, min_size=1, max_size=12),
       frees=st.lists(st.booleans(), min_size=12, max_size=12))
def test_weak_hash_never_shares_a_wrong_page(block_size, prompts, frees):
    """With a hash that collides all the time, every hit page still holds exactly the hitting prefix."""
    bm = M.PrefixCachingBlockManager(24, block_size, hash_fn=lambda parent, tokens: sum(tokens) % 3)
    content = {}
    for i, prompt in enumerate(prompts):
        if -(-len(prompt) // block_size) > bm.num_free_blocks:
            continue
        cached = bm.allocate_prompt(i, prompt)
        for j, page in enumerate(bm.block_table(i)[:len(prompt) // block_size]):
            key = tuple(prompt[:block_size * (j + 1)])
            if j < cached // block_size:
                assert content[page] == key, f"prompt {prompt} hit page {page}, which holds {content[page]}"
            else:
                content[page] = key
        if frees[i]:
            bm.free(i)


@pytest.mark.gpu
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_large_on_gpu(version):
    """64 requests sharing a 2048-token system prompt, head_dim 128: the size the benchmark times."""
    g.run_and_compare(version, sol.BENCH_SIZES[0], rtol=4 * RTOL)
