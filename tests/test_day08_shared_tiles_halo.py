"""Day 08 grader: 1D convolution, global re-reads vs a shared-memory tile with a halo."""

import numpy as np
import pytest

from course.grading import Grader

g = Grader(8)
sol = g.solution

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "mask-too-short": lambda xs: (xs[0], xs[1][:-1]),
        "x-2d": lambda xs: (np.ascontiguousarray(xs[0][None, :]), xs[1]),
    }
)


def test_halo_crosses_tile_boundaries():
    """Three tiles and a ragged end: outputs next to a tile edge read their neighbour tile's inputs."""
    g.run_and_compare("optimized", 3 * sol.TILE + sol.MASK_RADIUS + 1)


def test_optimized_stages_the_tile_in_shared_memory():
    """The day's idea, whatever the tile's shape or loading scheme: inputs stored to shared memory,
    a barrier, then read back from there; and nothing sent to local memory on the way."""
    rep = g.report("optimized")
    assert rep.count("st.shared") > 0 and rep.count("ld.shared") > 0, "optimized: no shared-memory traffic"
    assert rep.count("bar.sync") >= 1, "optimized: no barrier between staging the tile and reading it"
    assert rep.stack_bytes == 0, f"optimized: {rep.stack_bytes} bytes of stack frame (local memory)"


def test_naive_reads_neighbours_from_global_memory():
    rep = g.report("naive")
    assert rep.count("ld.shared") == rep.count("st.shared") == rep.count("bar.sync") == 0


@pytest.mark.gpu
def test_optimized_at_benchmark_scale():
    g.run_and_compare("optimized", (1 << 24) + 7)


def test_the_window_reads_from_the_tile_are_conflict_free():
    """Lane t reads tile word OUTPUTS_PER_THREAD * t + q: with an odd count the 32 lanes hit 32 banks,
    one wavefront a request (an even count would serialise them)."""
    opt = g.traffic("optimized")
    assert opt.shared_requests > 0, "optimized: no shared-memory requests: stage the tile in shared memory"
    assert opt.wavefronts_per_request <= 1.1, (
        f"optimized: {opt.wavefronts_per_request:.2f} wavefronts per shared request: lanes of a warp "
        "hit the same bank (a stride with a factor in common with 32)")
