"""Day 27 grader: the inclusive prefix sum, each thread summing its own prefix (quadratic) vs
Kogge-Stone in a double-buffered shared array, block totals scanned and added back."""

import numpy as np
import pytest

from course.grading import Grader

# int32 sums wrap by design (the interface: as int32 does); the simulator computes with NumPy scalars,
# which warn when they wrap.
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")

g = Grader(27)
sol = g.solution

test_optimized_matches_reference = g.matches_reference(versions=["optimized"])
test_naive_matches_reference = g.matches_reference(sol.NAIVE_SIZES, versions=["naive"])
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "two-dimensional": lambda xs: (np.ascontiguousarray(xs[0][None, :]),),
        "empty": lambda xs: (xs[0][:0].copy(),),
        "int64": lambda xs: (xs[0].astype(np.int64),),
    }
)


def test_kogge_stone_lives_in_shared_memory():
    """The block's steps read and write a shared array with a barrier between them (inside the
    loop: at least one after the load and one a step), nothing in local memory, for both dtypes."""
    for label in ("optimized", "optimized.int32"):
        rep = g.report(label)
        assert rep.count("st.shared") > 0 and rep.count("ld.shared") > 0, (
            f"{label}: no shared-memory traffic; stage the block's segment in a shared array and scan it there")
        assert rep.count("bar.sync") >= 2, (
            f"{label}: {rep.count('bar.sync')} barriers in the PTX; one after the load and one after each "
            "Kogge-Stone step (inside the loop)")
        assert rep.stack_bytes == 0, f"{label}: {rep.stack_bytes} bytes of stack frame (local memory)"


def test_naive_needs_no_shared_memory():
    rep = g.report("naive")
    assert rep.count("ld.shared") == rep.count("st.shared") == rep.count("bar.sync") == 0, (
        "naive: each thread sums its own prefix from global memory; no shared memory, no barrier")


def test_kogge_stone_is_conflict_free_and_linear_in_global_traffic():
    """Counted as Nsight Compute counts it: lanes of a warp read buf[src + t] and buf[src + t - d],
    32 consecutive words, one wavefront a request at every d; and the global loads grow like n, not
    like the naive version's n^2 / 64 warp-requests."""
    opt, naive = g.traffic("optimized"), g.traffic("naive")
    assert opt.shared_requests > 0, "optimized: no shared-memory requests: scan the block in shared memory"
    assert opt.wavefronts_per_request <= 1.01, (
        f"optimized: {opt.wavefronts_per_request:.2f} wavefronts per shared request: lanes of a warp should "
        "touch consecutive words of the buffer")
    assert opt.sectors_per_load <= 4.1 and opt.sectors_per_store <= 4.1, (
        f"optimized: {opt.sectors_per_load:.2f} sectors per load, {opt.sectors_per_store:.2f} per store: "
        "consecutive threads should load and store consecutive elements")
    assert naive.global_load_requests >= 10 * opt.global_load_requests, (
        f"naive: {naive.global_load_requests} global load requests against optimized's "
        f"{opt.global_load_requests}: the naive version should re-read the prefix for every output")


@pytest.mark.gpu
def test_optimized_at_bench_scale():
    """2^26 + 5 floats and int32: three levels of block totals (past THREADS^2 elements, too many
    threads for the simulator) and a ragged last block."""
    g.run_and_compare("optimized", (1 << 26) + 5)
    g.run_and_compare("optimized", ((1 << 26) + 5, "int32"))


@pytest.mark.gpu
def test_naive_at_bench_scale():
    g.run_and_compare("naive", ((1 << 16) + 3, "int32"))
