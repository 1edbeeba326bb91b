"""Day 32 grader: the stable merge of two sorted arrays, a co-rank search per output vs merge path
(a co-rank per tile, the tile staged in shared memory, a co-rank and a sequential merge per thread)."""

import numpy as np
import pytest

from course import checking
from course.grading import Grader

# checking.compare subtracts inf from inf on the infinities case (and counts equal infinities as equal)
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered in subtract:RuntimeWarning")

g = Grader(32)
sol = g.solution

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "a-2d": lambda xs: (np.ascontiguousarray(xs[0][None, :]), xs[1]),
        "b-2d": lambda xs: (xs[0], np.ascontiguousarray(xs[1][None, :])),
        "b-int32": lambda xs: (xs[0], xs[1].astype(np.int32)),
    }
)

F = np.float32
INF = np.inf


def _sorted(m, lo, hi, seed):
    return np.sort(np.random.default_rng(seed).uniform(lo, hi, m)).astype(F)


# Inputs a float comparison finds hard. -0.0 == +0.0, so a run of zeros of one sign in a and of the
# other sign in b is a tie whose origin shows in the output's sign bits: the stability check.
HARD = {
    "a-empty": lambda: (np.empty(0, F), _sorted(7, -1, 1, 1)),
    "b-empty": lambda: (_sorted(7, -1, 1, 2), np.empty(0, F)),
    "all-equal": lambda: (np.full(3000, 2.5, F), np.full(2500, 2.5, F)),
    "plus-zeros-then-minus-zeros": lambda: (np.full(3000, 0.0, F), np.full(2500, -0.0, F)),
    "minus-zeros-then-plus-zeros": lambda: (np.full(2500, -0.0, F), np.full(3000, 0.0, F)),
    "signed-zero-ties-among-values": lambda: (
        np.array([-1, -0.0, -0.0, 0.0, 1, 1], F), np.array([-1, 0.0, -0.0, 0.0, 1], F)),
    "infinities": lambda: (
        np.concatenate(([-INF] * 3, _sorted(1500, -5, 5, 3), [INF] * 2)).astype(F),
        np.concatenate(([-INF] * 2, _sorted(1700, -5, 5, 4), [INF] * 4)).astype(F)),
    "a-entirely-before-b": lambda: (_sorted(3000, -10, -1, 5), _sorted(2500, 1, 10, 6)),
    "b-entirely-before-a": lambda: (_sorted(3000, 1, 10, 7), _sorted(2500, -10, -1, 8)),
    "a-ends-where-b-starts": lambda: (np.linspace(-3, 0, 2900).astype(F), np.linspace(0, 3, 2900).astype(F)),
    "one-against-5000-middle": lambda: (np.array([0.0], F), _sorted(5000, -1, 1, 9)),
    "5000-against-one-middle": lambda: (_sorted(5000, -1, 1, 10), np.array([0.0], F)),
    "one-against-5000-first": lambda: (np.array([-2.0], F), _sorted(5000, -1, 1, 11)),
    "one-against-5000-last": lambda: (_sorted(5000, -1, 1, 12), np.array([2.0], F)),
}


def _bits(x):
    return np.ascontiguousarray(x, dtype=F).view(np.uint32)


@pytest.mark.parametrize("case", list(HARD))
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_hard_inputs_merge_stably(version, case):
    """Each hard input against the stable merge, bit for bit: values, and for ties between -0.0 and
    +0.0 which side each zero came from (a's before b's: a co-rank search that sends ties to b, a `<`
    for a `<=`, flips the signs here and nowhere else)."""
    g.require_implemented(version)
    a, b = HARD[case]()
    expected = sol.reference(a, b)
    got = checking.to_host(getattr(g.target, version)(a, b))
    report = checking.compare(got, expected, name=f"{version}({case})")
    assert report.ok, report.text
    wrong = np.flatnonzero(_bits(got) != _bits(expected))
    if wrong.size:
        k = wrong[0]
        pytest.fail(f"{version}({case}): {wrong.size} of {got.size} outputs are the right value from the wrong "
                    f"input (first at {k}: expected {expected[k]!r}, got {got[k]!r}); on ties the merge must "
                    "take a's element first (stable): compare a[mid] <= b[...] in the co-rank search and "
                    "va <= vb in the merge", pytrace=False)


@pytest.mark.parametrize("version", sol.VERSIONS)
def test_both_empty_gives_an_empty_array(version):
    g.require_implemented(version)
    got = checking.to_host(getattr(g.target, version)(np.empty(0, F), np.empty(0, F)))
    assert got.shape == (0,) and got.dtype == np.float32, f"{version}: got {got.shape} {got.dtype}"


def test_ties_straddle_several_tiles():
    """Three tiles of equal keys of both signs: every tile boundary's co-rank falls inside a run of
    ties, so the partition, the in-tile search and the sequential merge must agree on who goes first."""
    g.require_implemented("optimized")
    m = 3 * sol.TILE // 2 + 5
    a, b = np.full(m, 0.0, F), np.full(m + 3, -0.0, F)
    got = checking.to_host(g.target.optimized(a, b))
    assert np.array_equal(_bits(got), _bits(sol.reference(a, b))), (
        "optimized: a's +0.0s must all come before b's -0.0s across every tile boundary")


def test_optimized_stages_the_tile_in_shared_memory():
    """The day's idea, whatever the tile's shape: the block's ranges of a and b stored to shared memory,
    a barrier, then merged from there; nothing sent to local memory."""
    rep = g.report("optimized")
    assert rep.count("st.shared") > 0 and rep.count("ld.shared") > 0, "optimized: no shared-memory traffic"
    assert rep.count("bar.sync") >= 1, "optimized: no barrier between staging the tile and merging from it"
    assert rep.stack_bytes == 0, f"optimized: {rep.stack_bytes} bytes of stack frame (local memory)"


def test_naive_searches_global_memory():
    rep = g.report("naive")
    assert rep.count("ld.shared") == rep.count("st.shared") == rep.count("bar.sync") == 0, (
        "naive: one co-rank search per output over a and b in global memory; no shared memory")


def test_merge_path_reads_each_input_about_once():
    """Counted as Nsight Compute counts it: the tiled merge loads its inputs with coalesced requests
    and touches each input's sectors about once (under twice the input's bytes at this size, where the
    ragged range ends of every tile and the partition searches still show), and stores coalesced; the
    naive version's searches issue many times its load requests."""
    opt, naive = g.traffic("optimized"), g.traffic("naive")
    n = sum(sol.TEST_SIZES[-1])
    assert opt.shared_requests > 0, "optimized: no shared-memory requests: stage the tile in shared memory"
    assert opt.sectors_per_store >= 3.5, (
        f"optimized: {opt.sectors_per_store:.2f} sectors per store request: park the merged outputs in shared "
        "memory and store them with consecutive threads on consecutive floats (out[first + s])")
    assert opt.global_load_sectors * 32 <= 2 * 4 * n, (
        f"optimized: {opt.global_load_sectors} load sectors ({opt.global_load_sectors * 32} bytes) for {4 * n} "
        "bytes of input: each tile should load its ranges of a and b once, coalesced")
    assert naive.global_load_requests >= 5 * opt.global_load_requests, (
        f"naive: {naive.global_load_requests} load requests against optimized's {opt.global_load_requests}: "
        "the per-output search should cost many loads per output")


@pytest.mark.gpu
def test_at_benchmark_scale():
    for version in sol.VERSIONS:
        g.run_and_compare(version, ((1 << 24) + 7, (1 << 23) + 3))
