"""Day 19 grader: reversing each block's segment, mirrored global reads vs staging in shared memory."""

import numpy as np
import pytest

from course.grading import Grader

g = Grader(19)
sol = g.solution

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={"x-2d": lambda xs: (np.ascontiguousarray(xs[0][None, :]),)}
)


def test_segments_are_reversed_one_by_one():
    """Three full segments and a partial one of 7: each block mirrors its own segment, the last one
    about its own middle (a kernel that mirrors the whole array, or pads the last segment, fails)."""
    g.run_and_compare("optimized", 3 * sol.SEGMENT + 7)
    g.run_and_compare("naive", 3 * sol.SEGMENT + 7)


def test_optimized_stages_the_segment_in_shared_memory():
    """The day's idea, whatever the block size: the segment stored to shared memory, a barrier, then
    read back from there; nothing sent to local memory on the way."""
    rep = g.report("optimized")
    assert rep.count("st.shared") > 0 and rep.count("ld.shared") > 0, "optimized: no shared-memory traffic"
    assert rep.count("bar.sync") >= 1, "optimized: no barrier between staging the segment and reading it back"
    assert rep.stack_bytes == 0, f"optimized: {rep.stack_bytes} bytes of stack frame (local memory)"


def test_naive_reads_global_memory_backwards():
    rep = g.report("naive")
    assert rep.count("ld.shared") == rep.count("st.shared") == rep.count("bar.sync") == 0, (
        "naive: the mirrored global read needs no shared memory and no barrier")


def test_staged_kernel_is_coalesced_both_ways_and_conflict_free():
    """Counted as Nsight Compute counts it: a warp's load of 32 consecutive floats is 4 sectors (a
    partial warp fewer), and so is its store; the backwards read of shared memory touches 32
    consecutive words, one per bank: one wavefront a request."""
    opt = g.traffic("optimized")
    assert opt.shared_requests > 0, "optimized: no shared-memory requests: stage the segment in shared memory"
    assert opt.sectors_per_load <= 4.1, (
        f"optimized: {opt.sectors_per_load:.2f} sectors per load request: consecutive threads should load "
        "consecutive floats (x[base + s], s = t, t + 256, ...)")
    assert opt.sectors_per_store <= 4.1, (
        f"optimized: {opt.sectors_per_store:.2f} sectors per store request: consecutive threads should store "
        "consecutive floats (out[base + s])")
    assert opt.wavefronts_per_request <= 1.01, (
        f"optimized: {opt.wavefronts_per_request:.2f} wavefronts per shared request: lanes of a warp should "
        "touch consecutive words of the segment")


@pytest.mark.gpu
def test_optimized_at_benchmark_scale():
    g.run_and_compare("optimized", (1 << 24) + 7)
    g.run_and_compare("naive", (1 << 24) + 7)
