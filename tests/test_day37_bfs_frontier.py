"""Day 37 grader: BFS levels, vertex-parallel against a frontier queue with warp-aggregated enqueue."""

import re

import numpy as np
import pytest

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
    g.require_implemented("optimized")
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
    opt = g.report("optimized")
    assert re.search(r"\batom(?:\.global)?\.(?:cas|exch)\.b32", opt.ptx), (
        "optimized: no atom.cas / atom.exch in the PTX; claim a neighbour with "
        "cuda.atomic.cas(levels, u, int32(-1), next_level) so only one thread enqueues it")
    assert "vote.sync.ballot" in opt.ptx, "optimized: no ballot_sync; vote the warp's claims in one ballot"
    assert opt.count("shfl.sync") > 0, "optimized: no shfl.sync; hand the warp's base slot from lane 0 with a shuffle"
    assert not opt.uses_local_memory, f"optimized: {opt.stack_bytes} bytes of stack (local memory)"
    naive = g.report("naive")
    assert naive.count("atom") == 0, "naive: every writer of levels[u] stores the same value: no atomic needed"


def test_frontier_reads_far_less_than_scanning_every_vertex():
    """On a 24 x 24 grid (~36 levels, frontiers of ~20 of its 576 vertices) v1 reads every vertex's
    level in every level; v2 launches threads for the frontier only (6.8x fewer load requests)."""
    n = ("grid", 24)
    naive, opt = g.traffic("naive", n), g.traffic("optimized", n)
    assert opt.global_load_requests * 2 < naive.global_load_requests, (
        f"optimized: {opt.global_load_requests} global load requests against naive's "
        f"{naive.global_load_requests}: launch threads for the frontier's vertices, not for every vertex")


@pytest.mark.gpu
@pytest.mark.parametrize("n", [("grid", 512), ("power_law", 1 << 20)], ids=str)
def test_versions_at_large_size(n):
    for version in g.versions:
        g.run_and_compare(version, n)


@pytest.mark.gpu
def test_frontier_sizes_at_bench_size():
    """Thousands of warps claim a power-law graph's vertices at once: a claim that is not atomic
    enqueues some twice here."""
    g.require_implemented("optimized")
    inputs, _ = g.inputs(("power_law", 1 << 20), "frontier")
    ref = g.solution.reference(*inputs)
    assert np.array_equal(g.target.frontier_sizes(*inputs), np.bincount(ref[ref >= 0]))
