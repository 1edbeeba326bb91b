"""Day 85 grader: the swapping block manager (every page's content tracked through swap out/in,
copy-on-write, prefix-cache hits and frees), the two ways to move the pages (one transfer per page,
or gather + one transfer each way + scatter), one preemption round trip followed by a decode, and the
swap-or-recompute napkin math."""

import math
import re

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from course import cuda
from course.grading import Grader

g = Grader(85)
M = g.target
sol = g.solution
Config = sol.Config
RTOL = sol.RTOL

test_matches_reference = g.matches_reference(rtol=RTOL)


def _replace(xs, i, value):
    return xs[:i] + (value,) + xs[i + 1:]


def _group_pages(xs) -> int:
    """Distinct pages of the preempted sequences (forks share some): what a swap-in must find free."""
    tables, lens, bs = xs[2], xs[3], xs[1].shape[2]
    return len({int(b) for s in xs[5] for b in tables[s, :-(-int(lens[s]) // bs)]})


test_rejects_bad_inputs = g.rejects_bad_inputs(
    Config(3, 2, 1, 32, 4, 10, 2, "float32"),
    extra_cases={
        "cache-not-kv-pair": lambda xs: _replace(xs, 1, np.ascontiguousarray(xs[1][:1])),
        "swapped-out-of-range": lambda xs: _replace(xs, 5, np.array([0, 3], dtype=np.int32)),
        "swapped-twice": lambda xs: _replace(xs, 5, np.array([1, 1], dtype=np.int32)),
        "free-block-in-use": lambda xs: _replace(xs, 6, np.concatenate([xs[2][:1, :1].ravel(), xs[6][1:]])),
        "free-block-repeated": lambda xs: _replace(xs, 6, np.concatenate([xs[6][:1], xs[6][:-1]])),
        "too-few-free-blocks": lambda xs: _replace(xs, 6, np.ascontiguousarray(xs[6][:_group_pages(xs) - 1])),
        "context-zero": lambda xs: _replace(xs, 3, np.zeros_like(xs[3])),
    },
)


def test_swap_kernel_moves_words_and_naive_has_none():
    """v2's gather/scatter streams 8-byte words with no local or shared memory; v1 has no swap kernel
    (its pages travel as one DMA each); both decode with day 78's warp kernel."""
    swap = g.report("optimized.swap")
    assert re.search(r"^\s*ld\.(?:global\.)?[ub]64\s", swap.ptx, flags=re.M), "expected 64-bit loads"
    assert swap.stack_bytes == 0 and swap.count("ld.shared") == 0, "a page copy needs registers only"
    g.require_implemented("naive")
    assert not [k for k in g.kernels_of("naive") if "swap" in k], "v1 moves pages with one DMA each, no kernel"
    for version in sol.VERSIONS:
        attn = g.report(f"{version}.attention")
        assert attn.count("shfl.sync") > 0 and attn.count("bar.sync") > 0, "expected day 78's warp kernel"


# --- the transfers on their own: where the pages land, and how many link transfers they take ------------


@pytest.mark.parametrize("version", sol.VERSIONS)
def test_transfers_land_pages_and_count(monkeypatch, version):
    g.require_implemented(version)
    transfer = {"naive": M.swap_page_by_page, "optimized": M.swap_batched}[version]
    rng = np.random.default_rng(7)
    num_blocks, words = 12, 40  # 40 words: no multiple of a warp, so a copy's tail matters
    cache = rng.integers(1, 1 << 62, size=(2, num_blocks, words), dtype=np.uint64)
    out_pairs = np.array([[7, 0], [2, 1], [9, 2]], dtype=np.int32)  # (gpu page, host page)
    in_pairs = np.array([[0, 4], [1, 11], [2, 3]], dtype=np.int32)  # (host page, new gpu page)
    host = np.zeros((2, 3, words), dtype=np.uint64)
    d_cache = cuda.to_device(cache)
    link = []
    cls = type(d_cache)
    to_host, to_device = cls.copy_to_host, cls.copy_to_device

    def counted_to_host(self, ary=None, stream=0):
        if ary is not None and np.shares_memory(ary, host):
            link.append(("out", ary.nbytes))
        return to_host(self, ary, stream=stream)

    def counted_to_device(self, ary, stream=0):
        if isinstance(ary, np.ndarray) and np.shares_memory(ary, host):
            link.append(("in", ary.nbytes))
        return to_device(self, ary, stream=stream)

    monkeypatch.setattr(cls, "copy_to_host", counted_to_host)
    monkeypatch.setattr(cls, "copy_to_device", counted_to_device)
    transfer(d_cache, host, out_pairs, in_pairs)
    monkeypatch.undo()
    got = d_cache.copy_to_host()
    for (gpu, c), (_, new) in zip(out_pairs, in_pairs):
        assert np.array_equal(host[:, c], cache[:, gpu]), f"host page {c} does not hold gpu page {gpu}"
        assert np.array_equal(got[:, new], cache[:, gpu]), f"page {gpu} did not come back into page {new}"
    untouched = [b for b in range(num_blocks) if b not in in_pairs[:, 1]]
    assert np.array_equal(got[:, untouched], cache[:, untouched]), "a page outside the plan was written"
    page = words * 8
    if version == "naive":
        assert sorted(link) == sorted([("out", page)] * 6 + [("in", page)] * 6), link
    else:
        assert sorted(link) == [("in", 2 * 3 * page), ("out", 2 * 3 * page)], \
            f"expected one transfer of the whole group each way, got {link}"


def test_swap_report_counts_shared_pages_once():
    g.require_implemented("optimized")
    cfg = Config(6, 2, 1, 32, 4, 14, 3, "float32")  # the group is the second family: a prompt and two forks
    got = M.swap_report(cfg, seed=3)
    xs = sol.make_inputs(cfg, seed=3)
    tables, lens, bs = xs[2], xs[3], 4
    pages = [int(b) for s in xs[5] for b in tables[s, :math.ceil(int(lens[s]) / bs)]]
    assert got["pages"] == len(set(pages)) < got["pages_without_sharing"] == len(pages), got
    assert got["bytes_each_way"] == len(set(pages)) * 2 * bs * 32 * 4
    assert got["transfers"] == {"naive": 4 * len(set(pages)), "optimized": 2}


# --- the manager -------------------------------------------------------------------------------------


def test_swap_out_and_in_basics():
    bm = M.SwappingBlockManager(num_blocks=6, block_size=4, num_cpu_blocks=4)
    bm.allocate("a", 6)  # pages [p0, p1], p1 half full
    p0, p1 = bm.block_table("a")
    bm.fork("a", "b")
    bm.append_slot("b")  # b copies the shared tail: b = [p0, p2]
    (src, p2), = bm.take_copies()
    assert src == p1 and bm.block_table("b") == [p0, p2]
    out = bm.swap_out(["a", "b"])
    assert sorted(gpu for gpu, _ in out) == sorted([p0, p1, p2]), "each distinct page once: p0 is shared"
    cpu_of = dict(out)
    assert len(set(cpu_of.values())) == 3 and bm.num_free_cpu_blocks == 1
    assert bm.cpu_ref_count(cpu_of[p0]) == 2, "both swapped tables hold the shared page's host copy"
    assert bm.num_free_blocks == 6, "every GPU page of the group is released"
    assert bm.is_swapped("a") and bm.cpu_block_table("b") == [cpu_of[p0], cpu_of[p2]]
    assert bm.num_tokens("b") == 7
    with pytest.raises(KeyError):
        bm.append_slot("a")
    back = bm.swap_in(["b"])
    assert sorted(c for c, _ in back) == sorted([cpu_of[p0], cpu_of[p2]])
    assert bm.block_table("b") == [dict(back)[cpu_of[p0]], dict(back)[cpu_of[p2]]] and bm.num_tokens("b") == 7
    assert bm.cpu_ref_count(cpu_of[p0]) == 1 and bm.num_free_cpu_blocks == 2, "a still holds its host pages"
    with pytest.raises(ValueError):
        bm.allocate("a", 1)  # a swapped-out id is taken
    bm.free("a")  # ends a swapped sequence: its host pages go back
    bm.free("b")
    assert bm.num_free_cpu_blocks == 4 and bm.num_free_blocks == 6
    assert all(bm.ref_count(x) == 0 for x in range(6)) and all(bm.cpu_ref_count(x) == 0 for x in range(4))


def _snapshot(bm, seqs):
    return (bm.num_free_blocks, bm.num_free_cpu_blocks, bm.num_cached_blocks, bm.take_copies(),
            {s: (bm.is_swapped(s), bm.cpu_block_table(s) if bm.is_swapped(s) else bm.block_table(s),
                 bm.num_tokens(s)) for s in seqs})


def test_out_of_blocks_changes_nothing():
    bm = M.SwappingBlockManager(num_blocks=4, block_size=2, num_cpu_blocks=2)
    bm.allocate("a", 3)
    bm.allocate("b", 2)
    before = _snapshot(bm, "ab")
    with pytest.raises(M.OutOfBlocksError):
        bm.swap_out(["a", "b"])  # three pages, two host pages
    assert _snapshot(bm, "ab") == before
    bm.swap_out(["a"])
    bm.allocate("c", 6)  # a's pages went to c
    before = _snapshot(bm, "abc")
    with pytest.raises(M.OutOfBlocksError):
        bm.swap_in(["a"])
    assert _snapshot(bm, "abc") == before


def test_recompute_readmission_hits_the_prefix_cache():
    """Preempting by recompute frees the pages; the full prompt pages stay cached, so re-admitting the
    sequence with its prompt and generated tokens computes only what was never cached."""
    bm = M.SwappingBlockManager(num_blocks=8, block_size=4, num_cpu_blocks=1)
    prompt = list(range(10, 21))  # 11 tokens: two full pages cached
    assert bm.allocate_prompt("a", prompt) == 0
    generated = [5, 6, 7]
    for _ in generated:
        bm.append_slot("a")
    bm.free("a")  # preempted by recompute
    assert bm.allocate_prompt("a", prompt + generated) == 8, "the two cached prompt pages hit"


def test_plan_follows_the_manager():
    """plan_swap (the day contract's bookkeeping) is the manager's rule: same pages, same sharing."""
    bm = M.SwappingBlockManager(num_blocks=16, block_size=2, num_cpu_blocks=16)
    bm.allocate(0, 5)
    bm.fork(0, 1)
    bm.append_slot(1)
    bm.take_copies()
    bm.allocate(2, 3)
    bm.fork(2, 3)
    lens = np.array([bm.num_tokens(s) for s in range(4)], dtype=np.int32)
    tables = np.full((4, 4), -7, dtype=np.int32)
    for s in range(4):
        tables[s, :len(bm.block_table(s))] = bm.block_table(s)
    free = np.array([b for b in range(16) if b not in tables], dtype=np.int32)[::-1].copy()
    plan = M.plan_swap(tables, lens, [1, 2, 3], free, 2)
    out = bm.swap_out([1, 2, 3])
    assert sorted(plan.out_pairs[:, 0].tolist()) == sorted(gpu for gpu, _ in out), "the same pages leave"
    host_of, new_of = dict(plan.out_pairs.tolist()), dict(plan.in_pairs.tolist())
    renaming = set()  # (plan's host page, manager's host page): the same sharing if it is one-to-one
    for s in (1, 2, 3):
        old = tables[s, :len(bm.cpu_block_table(s))].tolist()
        assert plan.tables[s, :len(old)].tolist() == [new_of[host_of[b]] for b in old]
        renaming |= set(zip((host_of[b] for b in old), bm.cpu_block_table(s)))
    assert len(renaming) == len({p for p, _ in renaming}) == len({m for _, m in renaming}) == len(out)
    assert plan.tables[2, 0] == plan.tables[3, 0], "a page shared in the group stays shared after the trip"
    assert np.array_equal(plan.tables[0], tables[0]), "a sequence that stays keeps its table"


# --- the manager against a model that tracks every page's content ---------------------------------------

GARBAGE = ("garbage",)  # what a released page holds once another sequence has written over it
SEQS = st.integers(0, 3)
STEP = st.one_of(
    st.tuples(st.sampled_from(["prompt", "append", "append", "fork", "free"]), SEQS, SEQS,
              st.lists(st.integers(0, 2), min_size=1, max_size=7)),
    st.tuples(st.sampled_from(["swap_out", "swap_out", "swap_in", "swap_in"]), SEQS, SEQS,
              st.lists(SEQS, min_size=1, max_size=3)),
)


class Pages:
    """Content of every GPU and host page: slot -> the prefix (tuple of tokens) whose K/V it holds."""

    def __init__(self, bm, num_blocks, num_cpu_blocks, bs):
        self.bm, self.bs = bm, bs
        self.gpu = {b: [GARBAGE] * bs for b in range(num_blocks)}
        self.cpu = {c: [GARBAGE] * bs for c in range(num_cpu_blocks)}

    def clobber_released(self):
        """Pages nobody holds may be handed out and overwritten; cached GPU pages must survive."""
        for b, slots in self.gpu.items():
            if self.bm.ref_count(b) == 0 and not self.bm.is_cached(b):
                slots[:] = [GARBAGE] * self.bs
        for c, slots in self.cpu.items():
            if self.bm.cpu_ref_count(c) == 0:
                slots[:] = [GARBAGE] * self.bs


def _check(bm, pages, toks, num_blocks, num_cpu_blocks):
    gpu_refs, cpu_refs = {}, {}
    for s, tokens in toks.items():
        swapped = bm.is_swapped(s)
        table = bm.cpu_block_table(s) if swapped else bm.block_table(s)
        content = pages.cpu if swapped else pages.gpu
        refs = cpu_refs if swapped else gpu_refs
        assert bm.num_tokens(s) == len(tokens)
        assert len(table) == -(-len(tokens) // pages.bs), f"sequence {s}: {len(table)} pages for {len(tokens)} tokens"
        for b in table:
            refs[b] = refs.get(b, 0) + 1
        for t in range(len(tokens)):
            got = content[table[t // pages.bs]][t % pages.bs]
            assert got == tuple(tokens[:t + 1]), (f"sequence {s} ({'host' if swapped else 'gpu'}), token {t}: "
                                                  f"its slot holds {got}, expected {tuple(tokens[:t + 1])}")
    for b in range(num_blocks):
        assert bm.ref_count(b) == gpu_refs.get(b, 0), f"gpu block {b}: ref count vs tables holding it"
    for c in range(num_cpu_blocks):
        assert bm.cpu_ref_count(c) == cpu_refs.get(c, 0), f"host block {c}: ref count vs tables holding it"
    assert bm.num_free_blocks + len(gpu_refs) == num_blocks, "gpu: free + held != total: a block leaked"
    assert bm.num_free_cpu_blocks + len(cpu_refs) == num_cpu_blocks, "host: free + held != total: a block leaked"


def _attempt(bm, toks, fn, *args):
    """Run a manager call: (True, its result), or (False, None) after an OutOfBlocksError, which must
    leave everything as it was."""
    before = _snapshot(bm, toks)
    try:
        return True, fn(*args)
    except M.OutOfBlocksError:
        assert _snapshot(bm, toks) == before, "OutOfBlocksError changed the manager"
        return False, None


# No shrinking: a failing run of 20+ steps shrinks for minutes; the first failure is printed as found.
@settings(max_examples=100, deadline=None, phases=(Phase.explicit, Phase.reuse, Phase.generate))
@given(num_blocks=st.integers(1, 10), num_cpu_blocks=st.integers(1, 8), block_size=st.integers(1, 3),
       steps=st.lists(STEP, min_size=20, max_size=60))
def test_page_contents_survive_swaps_copies_and_frees(num_blocks, num_cpu_blocks, block_size, steps):
    bm = M.SwappingBlockManager(num_blocks, block_size, num_cpu_blocks)
    pages = Pages(bm, num_blocks, num_cpu_blocks, block_size)
    toks = {}  # seq_id -> its tokens (running or swapped out)
    fresh = iter(range(100, 10**6))  # appended tokens: never equal to a prompt token
    for op, a, b, arg in steps:
        running = {s for s in toks if not bm.is_swapped(s)}
        if op == "prompt":
            if a in toks:
                with pytest.raises(ValueError):
                    bm.allocate_prompt(a, arg)
                continue
            ok, cached = _attempt(bm, toks, bm.allocate_prompt, a, arg)
            if not ok:
                continue
            table = bm.block_table(a)
            for t in range(cached, len(arg)):  # hit pages already hold these prefixes
                pages.gpu[table[t // block_size]][t % block_size] = tuple(arg[:t + 1])
            toks[a] = list(arg)
        elif op == "append":
            if a not in running:
                with pytest.raises(KeyError):
                    bm.append_slot(a)
                continue
            ok, slot = _attempt(bm, toks, bm.append_slot, a)
            if not ok:
                continue
            for src, dst in bm.take_copies():  # the copy lands before the token, as on the GPU
                pages.gpu[dst] = list(pages.gpu[src])
            toks[a].append(next(fresh))
            page, offset = divmod(slot, block_size)
            assert bm.ref_count(page) == 1 and not bm.is_cached(page), "a token was written into a shared page"
            pages.gpu[page][offset] = tuple(toks[a])
        elif op == "fork":
            if a not in running or b in toks:
                with pytest.raises((KeyError, ValueError)):
                    bm.fork(a, b)
                continue
            bm.fork(a, b)
            toks[b] = list(toks[a])
        elif op == "free":
            if a not in toks:
                with pytest.raises(KeyError):
                    bm.free(a)
                continue
            bm.free(a)
            del toks[a]
        else:
            group = list(arg)
            want = running if op == "swap_out" else set(toks) - running
            if len(set(group)) != len(group) or not set(group) <= want:
                with pytest.raises((KeyError, ValueError)):
                    getattr(bm, op)(group)
                continue
            tables = {s: bm.block_table(s) if op == "swap_out" else bm.cpu_block_table(s) for s in group}
            ok, pairs = _attempt(bm, toks, getattr(bm, op), group)
            if not ok:
                continue
            src, dst = [p[0] for p in pairs], [p[1] for p in pairs]
            assert sorted(src) == sorted({x for t in tables.values() for x in t}), \
                f"{op}({group}): every distinct page of the group exactly once, got {pairs}"
            assert len(set(dst)) == len(dst), f"{op}({group}): two pages copied into one"
            into, outof = (pages.cpu, pages.gpu) if op == "swap_out" else (pages.gpu, pages.cpu)
            for s_page, d_page in pairs:
                into[d_page] = list(outof[s_page])
        pages.clobber_released()
        _check(bm, pages, toks, num_blocks, num_cpu_blocks)
    for s in list(toks):
        bm.free(s)
    assert bm.num_free_blocks == num_blocks and bm.num_free_cpu_blocks == num_cpu_blocks
    assert all(bm.ref_count(x) == 0 for x in range(num_blocks))


# --- swap or recompute ----------------------------------------------------------------------------------


def test_swap_vs_recompute_estimate():
    """The napkin math with the H200's numbers: 4096 tokens of Llama-3-8B (GQA, 128 KB a token) swap
    round trip vs a prefill of the same tokens; full multi-head attention (512 KB a token) evens it out."""
    est = M.swap_vs_recompute_estimate(4096, sol.LLAMA3_8B)
    assert est["bytes_each_way"] == 4096 * 2 * 32 * 8 * 128 * 2
    assert est["swap_ms"] == pytest.approx(2 * 4096 * 131072 / 55e9 * 1e3, rel=1e-6)
    flops = 2 * 8.03e9 * 4096 + 2 * 32 * 4096 * 4096 ** 2
    assert est["recompute_ms"] == pytest.approx(flops / 790e12 * 1e3, rel=1e-6)
    mha = M.swap_vs_recompute_estimate(4096, sol.LLAMA2_7B)
    assert mha["swap_ms"] == pytest.approx(4 * est["swap_ms"], rel=1e-6)
    assert est["swap_ms"] < est["recompute_ms"] / 4 and 0.5 < mha["swap_ms"] / mha["recompute_ms"] < 2


# --- on the GPU ---------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_large_on_gpu(version):
    """32 of 64 sequences of 4096 tokens (8 KV heads x 128, fp16) swapped out and back: 537 MB each way."""
    g.run_and_compare(version, sol.BENCH_SIZES[0], rtol=4 * RTOL)


@pytest.mark.gpu
def test_library_on_gpu():
    xs = sol.make_inputs(Config(16, 8, 2, 128, 16, 1024, 8, "float16"), seed=5)
    from course import checking

    report = checking.compare(sol.library(*xs), sol.reference(*xs), rtol=4 * RTOL, name="library")
    assert report.ok, report.text


@pytest.mark.gpu
def test_recompute_vs_swap_measured_on_gpu():
    g.require_implemented("optimized")
    got = M.recompute_vs_swap(2048, sol.LLAMA3_8B, repeats=3)
    assert got["source"] == "measured" and got["swap_ms"] > 0 and got["recompute_ms"] > 0, got
