"""Day 64 grader: top-k and top-p sampling, draw for draw against the float64 NumPy sampler: the whole row
sorted (naive), per-chunk top-k in shared memory merged (chunk_sort), the k-th key found by a radix select
of digit histograms and one compaction (optimized); the same final block scan after the last two."""

import numpy as np
import pytest

from course import ON_GPU, checking, traffic
from course.grading import Grader

g = Grader(64)
sol = g.solution

test_matches_reference = g.matches_reference(sol.NAIVE_SIZES, versions=("naive",))
# chunk_sort past a chunk (its chunk and merge passes; the tests below run it on small rows too)
test_chunk_sort_matches_reference = g.matches_reference(((2, 2101, 50, 0.9, 0.8),), versions=("chunk_sort",))
test_optimized_matches_reference = g.matches_reference(versions=("optimized",))

N = sol.TEST_SIZES[3]


def _set(i, value):
    return lambda xs: xs[:i] + (value,) + xs[i + 1:]


test_rejects_bad_inputs = g.rejects_bad_inputs(
    N,
    extra_cases={
        "top_k-0": _set(1, 0),
        "top_k-past-vocab": lambda xs: xs[:1] + (xs[0].shape[1] + 1,) + xs[2:],
        "top_k-past-MAX_K": lambda xs: (np.zeros((1, sol.MAX_K + 1), np.float32), sol.MAX_K + 1) + xs[2:4]
        + (xs[4][:1].copy(),),
        "top_k-float": _set(1, 5.0),
        "top_p-0": _set(2, 0.0),
        "top_p-past-1": _set(2, 1.01),
        "temperature-0": _set(3, 0.0),
        "temperature-negative": _set(3, -1.0),
        "logits-1d": lambda xs: (np.ascontiguousarray(xs[0][0]),) + xs[1:],
        "uniforms-too-short": lambda xs: xs[:4] + (xs[4][:-1].copy(),),
        "uniforms-2d": lambda xs: xs[:4] + (xs[4][:, None].copy(),),
        "no-columns": lambda xs: (xs[0][:, :0].copy(),) + xs[1:],
    },
)


def _run(version, xs):
    g.require_implemented(version)
    return checking.to_host(getattr(g.target, version)(*xs))


@pytest.mark.parametrize("version", sol.VERSIONS)
def test_greedy_is_argmax_lowest_id(version):
    """top_k = 1 is greedy decoding: the argmax, the lowest id among equal maxima, whatever the uniform."""
    x = np.zeros((3, 70), np.float32)
    x[0, [5, 40, 41]] = 3.0  # three equal maxima: id 5
    x[1] = np.arange(70, dtype=np.float32)[::-1].copy()  # id 0
    x[2, 69] = 1e4  # the last id, a large logit
    u = np.array([0.99, 0.5, 0.0], np.float32)
    got = _run(version, (x, 1, 0.5, 1.0, u))
    assert got.dtype == np.int32, f"{version}: tokens must be int32, got {got.dtype}"
    assert got.tolist() == [5, 0, 69], (
        f"{version}: greedy tokens {got.tolist()}, expected [5, 0, 69] (argmax, lowest id)")


@pytest.mark.parametrize("version", sol.VERSIONS)
def test_ties_go_to_the_lower_id(version):
    """All logits equal: every kept token has the same mass, so uniform u draws kept token floor(u keep) in
    id order: the top-k of a tied row is its lowest ids."""
    x = np.full((2, 100), 0.25, np.float32)
    u = np.array([0.05, 0.95], np.float32)  # 10 kept tokens: intervals of 0.1, u in the middle of one
    got = _run(version, (x, 10, 1.0, 1.0, u))
    assert got.tolist() == [0, 9], f"{version}: {got.tolist()}, expected [0, 9] (ties to the lower id)"


@pytest.mark.parametrize("version", sol.VERSIONS)
def test_top_p_cut_keeps_the_crossing_token(version):
    """Masses 0.5, 0.3, 0.2 (after top-k): top_p 0.6 keeps the first two (0.5 < 0.6 <= 0.8), so a uniform
    of 0.7 draws the second token (0.7 x 0.8 = 0.56 > 0.5); a cut one token early would draw the first."""
    lg = np.log(np.array([0.5, 0.3, 0.2, 1e-9], np.float64)).astype(np.float32)
    x = np.tile(lg[None, [2, 0, 3, 1]], (2, 1))  # ids: 0.2 at 0, 0.5 at 1, tiny at 2, 0.3 at 3
    got = _run(version, (x, 3, 0.6, 1.0, np.array([0.7, 0.2], np.float32)))
    assert got.tolist() == [3, 1], f"{version}: {got.tolist()}, expected [3, 1]"


@pytest.mark.parametrize("version", sol.VERSIONS)
def test_all_of_max_k(version):
    """top_k = vocab = MAX_K: the whole row kept (one thread a probability in the final block)."""
    n = (1, sol.MAX_K, sol.MAX_K, 0.95, 1.0)
    g.run_and_compare(version, n)


def _row_reads(version, n):
    """How many times the version's loads cover the logits (32-byte sectors x 32 / the logits' bytes)."""
    t = g.traffic(version, n)
    return 32 * t.global_load_sectors / (n[0] * n[1] * 4), t


def test_chunk_sort_reads_the_row_once():
    """The chunk pass reads each logit once (coalesced); the merges and the final block touch only
    candidates (8 bytes per kept pair) and k gathered logits: far from the naive's full-row sort through
    global memory, which reads every pair log2 P (log2 P + 1) / 2 times."""
    n = (1, 2101, 50, 0.9, 0.8)  # one row past a chunk: the chunk pass, then the final block
    reads, t = _row_reads("chunk_sort", n)
    assert reads <= 2.0, f"chunk_sort{n}: loads cover the logits {reads:.2f} times; read the row once"
    assert t.sectors_per_load <= 8, f"chunk_sort{n}: {t.sectors_per_load:.1f} sectors a load: not coalesced"
    naive_reads, _ = _row_reads("naive", (1, 1000, 7, 0.9, 1.0))
    assert naive_reads > 10 * reads, f"naive: {naive_reads:.1f} reads of the row, chunk_sort {reads:.1f}"


def test_each_radix_pass_reads_the_row_once():
    """Each of the PASSES histogram launches and the compaction reads the row once, coalesced (plus the
    row's nb x 256 counts each block merges); the final block reads only the k candidates and k logits."""
    n = (1, 1100, 50, 0.9, 0.8)  # two slices in the simulator
    g.require_implemented("optimized")
    if ON_GPU:
        pytest.skip("memory traffic is counted in the simulator; on a GPU, Nsight Compute counts it")
    (m,) = traffic.measure_day(g.target, sol, n, versions=["optimized"])  # g.traffic's run, kernel by kernel
    total = m.total
    nb, _ = sol.row_blocks(n[0], n[1])
    row = -(-n[1] * 4 // 32)  # the row's sectors
    # Besides the row, each block merges the row's nb x 256 counts (nb^2 x 32 sectors a pass) and each warp
    # reads a few broadcast words (the state, the equal keys of the blocks before it): a sector a request.
    counts = nb * nb * sol.RADIX * 4 // 32 + nb * sol.WARPS * (nb + 4)
    by_name = {k.name: k for k in m.kernels}
    hist = next(k for name, k in by_name.items() if "hist" in name)
    compact = next(k for name, k in by_name.items() if "compact" in name)
    assert hist.launches == sol.PASSES, f"optimized: {hist.launches} histogram launches, expected {sol.PASSES}"
    per_pass = hist.global_load_sectors / hist.launches
    assert row <= per_pass <= row + 2 + counts, (
        f"optimized{n}: a histogram pass loads {per_pass:.0f} sectors; the row is {row} (+ {counts} of counts)")
    assert row <= compact.global_load_sectors <= row + 2 + counts, (
        f"optimized{n}: the compaction loads {compact.global_load_sectors} sectors; the row is {row}")
    final = next(k for name, k in by_name.items() if "final" in name)
    assert final.global_load_sectors < row, (
        f"optimized{n}: the final block loads {final.global_load_sectors} sectors: read the k candidates, not the row")
    assert total.sectors_per_load <= 8, f"optimized{n}: {total.sectors_per_load:.1f} sectors a load: not coalesced"


@pytest.mark.parametrize("label", ("chunk_sort", "chunk_sort.final", "optimized.final"))
def test_topk_kernels_sort_in_shared_memory(label):
    """The chunk and final kernels sort in shared memory: shared loads and stores and barriers, no stack."""
    rep = g.report(label)
    assert rep.count("ld.shared") > 0 and rep.count("st.shared") > 0, f"{label}: sort the chunk in shared memory"
    assert rep.count("bar.sync") > 0, f"{label}: a barrier between the network's steps"
    assert not rep.uses_local_memory, f"{label}: {rep.stack_bytes} bytes of stack"


def test_radix_histogram_counts_in_shared_memory():
    """The histogram pass: shared atomics into the bins, barriers around them, no stack (the loads in flight
    stay in registers); the compaction takes its slots by global atomics and ranks ties behind barriers."""
    rep = g.report("optimized")
    assert rep.count("atom.shared") > 0, "optimized: count the digits with atomics on shared bins"
    assert rep.count("bar.sync") >= 2, "optimized: barriers between zeroing, counting and merging the bins"
    assert not rep.uses_local_memory, f"optimized: {rep.stack_bytes} bytes of stack"
    rep = g.report("optimized.compact")
    assert rep.count("atom") > rep.count("atom.shared"), "optimized.compact: slots by a global atomic"
    assert rep.count("bar.sync") > 0, "optimized.compact: barriers around the tile's rank scan"
    assert not rep.uses_local_memory, f"optimized.compact: {rep.stack_bytes} bytes of stack"


def _draw_rank(x, k, top_p, temperature, ranks):
    """Uniforms that draw, in row r, the token of rank ranks[r] (0 = the likeliest) of the float64 plan: the
    middle of its interval of the cumulative kept mass."""
    u = []
    for r, j in enumerate(ranks):
        _, pk, _, keep = sol._row_plan(x[r], k, top_p, temperature)
        ck = np.concatenate(([0.0], np.cumsum(pk[:keep])))
        u.append((ck[j] + ck[j + 1]) / 2 / ck[-1])
    return np.array(u, np.float32)


def _compare(version, xs):
    got = _run(version, xs)
    expected = sol.reference(*xs)
    assert got.tolist() == expected.tolist(), f"{version}: tokens {got.tolist()}, expected {expected.tolist()}"


def test_radix_ties_at_the_threshold_take_the_lowest_ids():
    """Many keys equal to the k-th largest, across the row's slices: 10 larger logits, 300 copies of the
    threshold value spread over the row, k = 40 takes the 30 lowest-id copies. Row 1 is all equal (every
    key ties). Each row draws its last kept token: the 30th copy by id, then id 39."""
    vocab, k = 2600, 40
    x = np.zeros((2, vocab), np.float32)
    x[0] = -np.linspace(1.0, 3.0, vocab, dtype=np.float32)
    x[0, 7::8][:300] = 0.5  # ids 7, 15, ..., 2399: both slices of the row
    x[0, [3, 100, 1400, 2500, 2599, 50, 900, 1800, 2200, 1]] = np.arange(10, dtype=np.float32) + 1.0
    x[1] = 2.0
    u = _draw_rank(x, k, 1.0, 1.0, (k - 1, k - 1))
    _compare("optimized", (x, k, 1.0, 1.0, u))


def test_radix_kth_key_at_a_bucket_boundary():
    """The k-th largest key is the last key of its first-pass bucket (k logits share the top digit,
    sign and exponent; all others are far below): the pass must keep that bucket (rem == its inclusive count),
    not step to the next. Row 1: top_k = vocab (the k-th key is the row's last, in the last bucket)."""
    vocab, k = 1500, 8
    x = np.zeros((2, vocab), np.float32)
    x[0] = np.linspace(-3.0, 3.0, vocab, dtype=np.float32)
    x[0, [5, 700, 1499, 33, 1200, 800, 64, 1000]] = 64.0 + np.arange(8, dtype=np.float32) * 0.5  # [64, 128)
    x[1] = np.linspace(-3.0, 3.0, vocab, dtype=np.float32)
    _compare("optimized", (x[:1], k, 1.0, 1.0, _draw_rank(x[:1], k, 1.0, 1.0, (k - 1,))))
    _compare("optimized", (x[1:, :k], k, 1.0, 1.0, _draw_rank(x[1:, :k], k, 1.0, 1.0, (k - 1,))))


def test_naive_sorts_in_global_memory():
    """The contrast: the naive network works on a global buffer (its only shared array: the sum's slots)."""
    rep = g.report("naive")
    assert rep.count("bar.sync") > 0, "naive: the network needs a barrier a step"


@pytest.mark.gpu
@pytest.mark.parametrize("n", sol.BENCH_SIZES, ids=[str(n) for n in sol.BENCH_SIZES])
def test_bench_size_draw_for_draw(n):
    """At the benchmark sizes (Llama 3's 128256-token vocabulary), every row's token equals the reference's."""
    g.run_and_compare("optimized", n)
    g.run_and_compare("chunk_sort", n)
