"""Day 07 grader: 1D convolution with the filter bank in global memory, then in constant memory."""

import numpy as np
import pytest

from course import checking
from course.grading import Grader

g = Grader(7)
sol = g.solution

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "which-negative": lambda xs: (xs[0], -1),
        "which-past-bank": lambda xs: (xs[0], sol.NUM_FILTERS),
        "which-float": lambda xs: (xs[0], 1.0),
        "x-2d": lambda xs: (np.ascontiguousarray(xs[0][None, :]), xs[1]),
    }
)


@pytest.mark.parametrize("which", range(len(sol.FILTER_NAMES)), ids=sol.FILTER_NAMES)
def test_every_filter_of_the_bank(which):
    """Each row of the bank, picked at run time, gives its own filter (the sharpen row sums to one
    with negative taps: outputs near zero test the tolerance)."""
    for version in g.versions:
        g.require_implemented(version)
        x, _ = sol.make_inputs(777, seed=which)
        checking.assert_matches(getattr(g.target, version)(x, which), sol.reference(x, which),
                                name=f"{version}(which={which})")


def test_optimized_reads_the_mask_from_constant_memory():
    rep = g.report("optimized")
    assert rep.count("ld.const") >= 1, "optimized: no ld.const in PTX: is the bank a cuda.const.array_like?"


def test_naive_reads_the_mask_from_global_memory():
    rep = g.report("naive")
    assert rep.count("ld.const") == 0, "naive: the contrast version should read the bank from global memory"
    assert rep.count("ld.global") + rep.count("ld (generic)") >= 2 * sol.MASK_WIDTH


def test_no_local_memory():
    for label in ("naive", "optimized"):
        rep = g.report(label)
        assert rep.stack_bytes == 0, f"{label}: {rep.stack_bytes} bytes of stack frame"


@pytest.mark.gpu
def test_optimized_at_benchmark_scale():
    g.run_and_compare("optimized", (1 << 24) + 5)
