"""Day 28 grader: inclusive scan, Kogge-Stone (double-buffered, n log n adds) vs Brent-Kung (up-sweep
and down-sweep, work-efficient) with a padded, conflict-free shared index; any length through block
scans, a scan of the block totals and an add-back."""

import numpy as np
import pytest

from course.grading import Grader

# The int32 scans wrap on purpose (the interface: int32 adds as the GPU does them); in the simulator
# NumPy warns about each wrapped scalar add.
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")

g = Grader(28)
sol = g.solution
TRAFFIC_N = 2 * sol.SPAN + 5  # two whole blocks and a ragged third: every level of both sweeps

test_matches_reference = g.matches_reference()
# int32 over its whole range: nearly every prefix wraps, and the answer must be exact.
test_int32_matches_reference = g.matches_reference(
    sizes=[(1, "int32"), (1025, "int32"), (2053, "int32")], rtol=0.0)
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "two-dimensional": lambda xs: (np.ascontiguousarray(xs[0][None, :]),),
        "int64": lambda xs: (xs[0].astype(np.int64),),
        "empty": lambda xs: (xs[0][:0].copy(),),
    }
)


@pytest.mark.parametrize("version", sol.VERSIONS)
def test_block_scan_lives_in_shared_memory(version):
    """Both block scans load the segment into shared memory and sweep it there, a barrier between
    steps (a loop of steps: at least two barriers in the PTX), nothing in local memory."""
    rep = g.report(version)
    assert rep.count("st.shared") > 0 and rep.count("ld.shared") > 0, (
        f"{version}: no shared-memory traffic; load the block's segment into a shared array and scan it there")
    assert rep.count("bar.sync") >= 2, (
        f"{version}: {rep.count('bar.sync')} barriers in the PTX; one after the load and one after each step")
    assert rep.stack_bytes == 0, f"{version}: {rep.stack_bytes} bytes of stack frame (local memory)"


def test_brent_kung_does_less_shared_work():
    """Work-efficient: Kogge-Stone touches every word at every one of its log2(SPAN) steps; the two sweeps
    touch ~2 words per element in all. Fewer shared-memory requests, the same global sectors."""
    ks, bk = g.traffic("naive", TRAFFIC_N), g.traffic("optimized", TRAFFIC_N)
    assert bk.shared_requests <= 0.6 * ks.shared_requests, (
        f"optimized: {bk.shared_requests} shared requests against Kogge-Stone's {ks.shared_requests}; "
        "the up-sweep halves the active threads each level, the down-sweep doubles them back")
    assert bk.global_load_sectors <= ks.global_load_sectors * 1.05, (
        f"optimized: {bk.global_load_sectors} global sectors loaded against naive's {ks.global_load_sectors}; "
        "load the segment coalesced (elements t and t + BK_THREADS), once")


def test_padded_index_is_conflict_free():
    """Lanes of a sweep level are 2s elements apart: unpadded they meet in a few banks (the simulator
    counts ~3.5 wavefronts per request); word i stored at i + i // 32 spreads every level over 32 banks.
    (The simulator counts ~1.03, not 1.00: it groups the k-th execution of a line by each lane into one
    request, and in warp 0's first down-sweep levels lanes join one level at a time.)"""
    bk = g.traffic("optimized", TRAFFIC_N)
    assert bk.shared_requests > 0, "optimized: no shared-memory requests: scan the segment in shared memory"
    assert bk.wavefronts_per_request <= 1.1, (
        f"optimized: {bk.wavefronts_per_request:.2f} wavefronts per shared request; lanes 2s elements apart "
        "share banks: store element i at padded(i) = i + i // 32")


@pytest.mark.gpu
@pytest.mark.parametrize("version", sol.VERSIONS)
@pytest.mark.parametrize("n", [(1 << 24) + 7, ((1 << 24) + 7, "int32")], ids=["float32", "int32"])
def test_at_scale(version, n):
    """2^24 + 7 elements: 16385 blocks, whose totals take two more levels of the scan."""
    g.run_and_compare(version, n, rtol=0.0 if not isinstance(n, int) else None)
