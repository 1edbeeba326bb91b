"""Day 09 grader: 2D convolution, everything from global memory vs constant taps + a shared tile."""

import re

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


# (version, its output tile (rows, cols)): the one-column kernel's and the wide kernel's
TILES = {"column": (sol.TILE_H, sol.TILE_W), "optimized": (sol.WIDE_H, sol.WIDE_W)}


@pytest.mark.parametrize("version", list(TILES))
def test_halo_crosses_tile_edges_both_ways(version):
    """A (2, 2) grid of tiles plus a ragged row and column: every tile edge, in both directions, reads
    pixels its neighbouring tiles own. The width is odd: the wide kernel's last thread of a row has
    one of its COLS outputs inside the image."""
    tile_h, tile_w = TILES[version]
    g.run_and_compare(version, (tile_h + 3, 2 * tile_w + 1))


@pytest.mark.parametrize("version", list(TILES))
def test_interior_tiles(version):
    """A (4, 4) grid of tiles, ragged at the bottom and right: the four middle tiles' spans lie wholly
    inside the image and take the unclamped path, their neighbours the clamped one; both must agree."""
    tile_h, tile_w = TILES[version]
    g.run_and_compare(version, (3 * tile_h + 3, 3 * tile_w + 5))


@pytest.mark.parametrize("version", list(TILES))
def test_tiled_reads_taps_from_constant_and_pixels_from_shared(version):
    """The day's idea, whatever the tile's shape or loading scheme: taps through the constant cache,
    pixels stored to shared memory, a barrier, then read back from there; no local memory."""
    rep = g.report(version)
    assert rep.count("ld.const") >= 1, f"{version}: no ld.const: is the bank a cuda.const.array_like?"
    assert rep.count("st.shared") > 0 and rep.count("ld.shared") > 0, f"{version}: no shared-memory tile"
    assert rep.count("bar.sync") >= 1, f"{version}: no barrier between staging the tile and reading it"
    assert rep.stack_bytes == 0, f"{version}: {rep.stack_bytes} bytes of stack frame (local memory)"


def _tile_loop_instructions(ptx):
    """PTX instructions in the largest loop with a barrier: the walk over tiles, one tile a trip."""
    lines = [ln.split("//")[0].strip() for ln in ptx.splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith((".", "{", "}"))]
    labels, best = {}, 0
    for i, ln in enumerate(lines):
        if re.match(r"^\$\w+:$", ln):
            labels[ln[:-1]] = i
            continue
        m = re.search(r"\bbra(?:\.uni)?\s+(\$\w+);", ln)
        if m and m.group(1) in labels:  # a backward branch closes a loop
            body = [b for b in lines[labels[m.group(1)]:i + 1] if not b.endswith(":")]
            if any(re.match(r"^(?:@!?%\w+\s+)?(?:bar|barrier)\.sync\b", b) for b in body):
                best = max(best, len(body))
    return best


def test_optimized_issues_fewer_instructions_per_output():
    """The kernel is issue-bound: the wide kernel's tile loop must issue fewer instructions per output
    than the one-column kernel's (PTX of one trip / outputs a thread a tile). The 25 FMAs an output
    stay; the shared loads, address arithmetic and tile overhead an output must shrink."""
    g.require_implemented("column", "optimized")
    outputs = {"column": getattr(g.target, "ROWS_PER_THREAD", 1),
               "optimized": getattr(g.target, "WIDE_ROWS", 1) * getattr(g.target, "COLS", 1)}
    per_output = {}
    for version, n in outputs.items():
        instructions = _tile_loop_instructions(g.report(version).ptx)
        assert instructions, f"{version}: no loop with a barrier in the PTX: does the block walk its tiles?"
        per_output[version] = instructions / n
    assert per_output["optimized"] < 0.95 * per_output["column"], (
        f"optimized issues {per_output['optimized']:.1f} PTX instructions per output in its tile loop, the "
        f"one-column kernel {per_output['column']:.1f}: several outputs a thread along x should share each "
        "window row's shared loads")


def test_naive_reads_everything_from_global_memory():
    rep = g.report("naive")
    assert rep.count("ld.const") == 0, "naive: the contrast version reads the bank from global memory"
    assert rep.count("ld.shared") == rep.count("st.shared") == rep.count("bar.sync") == 0, \
        "naive: the contrast version uses no shared memory"


@pytest.mark.gpu
@pytest.mark.parametrize("version", list(TILES))
def test_tiled_at_benchmark_scale(version):
    g.run_and_compare(version, (2053, 4099))


@pytest.mark.gpu
def test_naive_at_benchmark_scale():
    g.run_and_compare("naive", (2053, 4099))
