"""Day 09 grader: 2D convolution, everything from global memory vs constant taps + a shared tile."""

import numpy as np
import pytest

from course import checking
from course.grading import Grader

g = Grader(9)
sol = g.solution

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "img-1d": lambda xs: (np.ascontiguousarray(xs[0][0]), xs[1]),
        "img-3d": lambda xs: (np.ascontiguousarray(xs[0][None]), xs[1]),
        "which-negative": lambda xs: (xs[0], -1),
        "which-past-bank": lambda xs: (xs[0], sol.NUM_FILTERS),
        "which-float": lambda xs: (xs[0], 1.0),
    }
)


@pytest.mark.parametrize("which", range(sol.NUM_FILTERS), ids=sol.FILTER_NAMES)
def test_every_filter_of_the_bank(which):
    """Each filter, picked at run time. "edge-x" is odd in x and "lopsided" has no symmetry at all:
    a mask read flipped or transposed fails here even where the Gaussian would hide it."""
    for version in g.versions:
        g.require_implemented(version)
        img, _ = sol.make_inputs((19, 45), seed=which)
        checking.assert_matches(getattr(g.target, version)(img, which), sol.reference(img, which),
                                name=f"{version}(which={which})")


def test_halo_crosses_tile_edges_both_ways():
    """A (2, 2) grid of tiles plus a ragged row and column: every tile edge, in both directions, reads
    pixels its neighbouring tiles own."""
    g.run_and_compare("optimized", (sol.TILE_H + 3, 2 * sol.TILE_W + 1))


def test_interior_tiles():
    """A (4, 4) grid of tiles, ragged at the bottom and right: the four middle tiles' spans lie wholly
    inside the image and take the unclamped path, their neighbours the clamped one; both must agree."""
    g.run_and_compare("optimized", (3 * sol.TILE_H + 3, 3 * sol.TILE_W + 5))


def test_optimized_reads_taps_from_constant_and_pixels_from_shared():
    """The day's idea, whatever the tile's shape or loading scheme: taps through the constant cache,
    pixels stored to shared memory, a barrier, then read back from there; no local memory."""
    rep = g.report("optimized")
    assert rep.count("ld.const") >= 1, "optimized: no ld.const: is the bank a cuda.const.array_like?"
    assert rep.count("st.shared") > 0 and rep.count("ld.shared") > 0, "optimized: no shared-memory tile"
    assert rep.count("bar.sync") >= 1, "optimized: no barrier between staging the tile and reading it"
    assert rep.stack_bytes == 0, f"optimized: {rep.stack_bytes} bytes of stack frame (local memory)"


def test_naive_reads_everything_from_global_memory():
    rep = g.report("naive")
    assert rep.count("ld.const") == 0, "naive: the contrast version reads the bank from global memory"
    assert rep.count("ld.shared") == rep.count("st.shared") == rep.count("bar.sync") == 0, \
        "naive: the contrast version uses no shared memory"


@pytest.mark.gpu
def test_optimized_at_benchmark_scale():
    g.run_and_compare("optimized", (2053, 4099))


@pytest.mark.gpu
def test_naive_at_benchmark_scale():
    g.run_and_compare("naive", (2053, 4099))
