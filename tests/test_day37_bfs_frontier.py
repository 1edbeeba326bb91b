"""Day 37 grader: BFS levels, vertex-parallel, a frontier queue with warp-aggregated enqueue, and a hybrid that
runs the small levels inside one single-block launch."""

import contextlib
import re

import numpy as np
import pytest

from course import checking
from course.grading import Grader

g = Grader(37)


def _with(xs, **changes):
    indptr, indices, source = xs
    return (changes.get("indptr", indptr), changes.get("indices", indices), changes.get("source", source))


def _decreasing(xs):
    indptr = xs[0].copy()
    indptr[1] = indptr[2] + 1  # row 1 would end before it starts
    return _with(xs, indptr=indptr)


test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "source-negative": lambda xs: _with(xs, source=-1),
        "source-past-end": lambda xs: _with(xs, source=xs[0].size - 1),
        "source-not-int": lambda xs: _with(xs, source=1.5),
        "indptr-not-from-0": lambda xs: _with(xs, indptr=xs[0] + np.int32(1)),
        "indptr-decreasing": _decreasing,
        "indptr-empty": lambda xs: _with(xs, indptr=np.zeros(0, dtype=np.int32)),
        "indices-too-short": lambda xs: _with(xs, indices=xs[1][:-1].copy()),
        "indices-2d": lambda xs: _with(xs, indices=xs[1].reshape(1, -1)),
        "index-out-of-range": lambda xs: _with(xs, indices=np.where(xs[1] == xs[1].max(), xs[0].size - 1,
                                                                     xs[1]).astype(np.int32)),
    }
)


@pytest.mark.parametrize("n", [("star", 301), ("multi", 257), ("power_law", 1031), ("components", 150)],
                         ids=str)
def test_each_vertex_enters_one_frontier_once(n):
    """v2's queues hold each reachable vertex exactly once, at its level: the frontier sizes the host
    read back are the level counts. A vertex enqueued twice (a claim that is not atomic) or lost (two
    claimants given one slot) changes them."""
    g.require_implemented("queue")
    inputs, seed = g.inputs(n, "frontier")
    expected = np.bincount(g.solution.reference(*inputs)[g.solution.reference(*inputs) >= 0])
    got = g.target.frontier_sizes(*inputs)
    assert np.array_equal(got, expected), (
        f"frontier sizes {got.tolist()} but the levels hold {expected.tolist()} vertices "
        f"(make_inputs({n!r}, seed={seed})): each vertex must be claimed and enqueued exactly once")


def test_claim_is_atomic_and_enqueue_is_warp_aggregated():
    """The claim of a neighbour is an atomic read-modify-write of levels (compare-and-swap or
    exchange): two frontier vertices that share a neighbour race for it in the same level, and a
    plain read then write lets both win. The enqueue votes (ballot), shares the warp's base with a
    shuffle and uses no local memory. The naive kernel needs no atomic at all."""
    for label in ("queue", "optimized"):
        opt = g.report(label)
        assert re.search(r"\batom(?:\.global)?\.(?:cas|exch)\.b32", opt.ptx), (
            f"{label}: no atom.cas / atom.exch in the PTX; claim a neighbour with "
            "cuda.atomic.cas(levels, u, int32(-1), next_level) so only one thread enqueues it")
        assert "vote.sync.ballot" in opt.ptx, f"{label}: no ballot_sync; vote the warp's claims in one ballot"
        assert opt.count("shfl.sync") > 0, (
            f"{label}: no shfl.sync; hand the warp's base slot from lane 0 with a shuffle")
        assert not opt.uses_local_memory, f"{label}: {opt.stack_bytes} bytes of stack (local memory)"
    hybrid = g.report("optimized")
    assert hybrid.count("bar.sync") >= 2, (
        f"optimized: {hybrid.count('bar.sync')} bar.sync; one block runs level after level: a "
        "cuda.syncthreads() after each level's expansion and one after thread 0 advances the level")
    naive = g.report("naive")
    assert naive.count("atom") == 0, "naive: every writer of levels[u] stores the same value: no atomic needed"


def test_frontier_reads_far_less_than_scanning_every_vertex():
    """On a 24 x 24 grid (~36 levels, frontiers of ~20 of its 576 vertices) v1 reads every vertex's
    level in every level; v2 launches threads for the frontier only (6.8x fewer load requests)."""
    n = ("grid", 24)
    naive, opt = g.traffic("naive", n), g.traffic("queue", n)
    assert opt.global_load_requests * 2 < naive.global_load_requests, (
        f"queue: {opt.global_load_requests} global load requests against naive's "
        f"{naive.global_load_requests}: launch threads for the frontier's vertices, not for every vertex")


def test_hybrid_runs_small_levels_in_one_launch():
    """A grid's frontiers are ~20 vertices: v3 runs the whole search in one single-block launch (and
    the init), where v2 launches once a level. The barrier between levels must be in the kernel: a
    block whose threads start level L + 1 before all of level L's enqueues are done reads a count
    that is not final (the simulator names the shared (level, count) pair read and written with no
    barrier between)."""
    n = ("grid", 11)
    queue, hybrid = g.traffic("queue", n), g.traffic("optimized", n)
    assert hybrid.launches <= 2, (
        f"optimized: {hybrid.launches} launches on {n!r} (the queue version: {queue.launches}); while the "
        f"frontier has at most SMALL_FRONTIER vertices, one block runs level after level in one launch")
    assert queue.launches > 4 * hybrid.launches


def _expected_launches(levels, small):
    """(kind, level, frontier size) of every level launch v3 makes for these levels: one "block" launch
    for each run of levels of 1 to `small` vertices, one "grid" launch for every bigger level."""
    sizes = np.bincount(levels[levels >= 0])
    out = []
    for level, size in enumerate(sizes):
        if size > small:
            out.append(("grid", level, int(size)))
        elif level == 0 or sizes[level - 1] > small:
            out.append(("block", level, int(size)))
    return out


@pytest.mark.parametrize("n", ["corner grid 16", ("power_law", 1031)], ids=str)
def test_hybrid_switches_to_the_grid_and_back(n):
    """With a small threshold the frontier outgrows the block and shrinks again: the big levels go to
    the multi-block kernel one launch each, and the block takes over again at the right level. A host
    that does not advance the level after a big launch (or a block that reports the level it started,
    not the one it reached) restarts on an empty counter and leaves the rest unreached."""
    g.require_implemented("optimized")
    from course import ON_GPU, traffic

    if n == "corner grid 16":  # frontiers 1, 2, ..., 16, ..., 2, 1: block, 15 grid levels, block
        indptr, indices = g.solution.grid_graph(16)
        inputs, seed, small = (indptr, indices, 0), None, 8
    else:
        inputs, seed = g.inputs(n, "hybrid")
    expected = g.solution.reference(*inputs)
    if seed is not None:  # small enough that the middle levels go to the grid, the last to the block
        small = max(8, int(np.bincount(expected[expected >= 0])[-1]))
    want = _expected_launches(expected, small)
    assert [k for k, _, _ in want].count("grid") >= 2 and want[-1][0] == "block", want  # the graph switches
    with contextlib.nullcontext() if ON_GPU else traffic.record() as rec:
        levels, launches = g.target.bfs_hybrid(*inputs, small_frontier=small)
    got = levels.copy_to_host() if hasattr(levels, "copy_to_host") else np.asarray(levels)
    report = checking.compare(got, expected, name=f"bfs_hybrid(small_frontier={small})")
    assert report.ok, f"{report.text}\n  ({n!r}, seed={seed}; launches {launches})"
    assert [tuple(x) for x in launches] == want, (
        f"launches {launches}, expected {want}: a frontier of 1 to {small} vertices runs in the block "
        f"(one launch until it grows past {small} or empties), a bigger one in the grid")
    if rec is not None:  # the simulator counted the kernels' launches as well
        counted = {k.name: k.launches for k in rec.kernels}
        blocks = sum(k == "block" for k, _, _ in want)
        assert counted.get("small_frontier_kernel") == blocks, counted
        assert counted.get("expand_frontier_kernel") == len(want) - blocks, counted


@pytest.mark.gpu
@pytest.mark.parametrize("n", [("grid", 512), ("power_law", 1 << 20)], ids=str)
def test_versions_at_large_size(n):
    for version in g.versions:
        g.run_and_compare(version, n)


@pytest.mark.gpu
def test_frontier_sizes_at_bench_size():
    """Thousands of warps claim a power-law graph's vertices at once: a claim that is not atomic
    enqueues some twice here."""
    g.require_implemented("queue")
    inputs, _ = g.inputs(("power_law", 1 << 20), "frontier")
    ref = g.solution.reference(*inputs)
    assert np.array_equal(g.target.frontier_sizes(*inputs), np.bincount(ref[ref >= 0]))
