"""Day 10 grader: 3D 7-point stencil, seven global loads per point vs a shared plane + register queue."""

import numpy as np
import pytest

from course import checking
from course.grading import Grader

g = Grader(10)
sol = g.solution

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "u-2d": lambda xs: (np.ascontiguousarray(xs[0][0]), xs[1]),
        "u-4d": lambda xs: (np.ascontiguousarray(xs[0][None]), xs[1]),
        "coef-too-short": lambda xs: (xs[0], xs[1][:3]),
        "coef-2d": lambda xs: (xs[0], np.ascontiguousarray(xs[1][None, :])),
    }
)


def test_march_crosses_a_chunk_boundary():
    """Two z chunks: the first plane of the second chunk needs the last plane of the first as z - 1,
    and the last plane of the first needs the second's first as z + 1."""
    g.run_and_compare("optimized", (sol.Z_CHUNK + 2, 3, 5))


def test_each_axis_has_its_own_weight():
    """A grid that varies along one axis at a time: a kernel that swaps two axes' weights (or their
    neighbours) gets the wrong answer on at least one of them."""
    g.require_implemented("optimized")
    coef = np.array([0.1, 0.2, 0.3, 0.15], np.float32)
    shape = (3, 6, 9)
    for axis in range(3):
        ramp = np.arange(shape[axis], dtype=np.float32) ** 2
        u = np.ascontiguousarray(np.broadcast_to(ramp.reshape([-1 if a == axis else 1 for a in range(3)]), shape))
        checking.assert_matches(g.target.optimized(u, coef), sol.reference(u, coef), name=f"optimized(axis {axis})")


def test_optimized_uses_a_shared_plane_and_registers():
    rep = g.report("optimized")
    assert rep.count("st.shared") > 0 and rep.count("ld.shared") > 0, "optimized: no shared-memory plane"
    assert rep.count("bar.sync") >= 1, "optimized: a plane needs a barrier between its stores and its neighbours' reads"
    assert rep.stack_bytes == 0, f"optimized: {rep.stack_bytes} bytes of stack frame: the z queue left registers"


def test_naive_reads_neighbours_from_global_memory():
    rep = g.report("naive")
    assert rep.count("ld.shared") == rep.count("st.shared") == rep.count("bar.sync") == 0, \
        "naive: the contrast version uses no shared memory"
    assert rep.count("ld.global") + rep.count("ld (generic)") >= 7, "naive: fewer than seven loads per point"


@pytest.mark.gpu
def test_optimized_at_benchmark_scale():
    g.run_and_compare("optimized", (131, 259, 517))


@pytest.mark.gpu
def test_naive_at_benchmark_scale():
    g.run_and_compare("naive", (131, 259, 517))
