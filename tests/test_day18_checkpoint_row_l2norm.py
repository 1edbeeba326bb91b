"""Day 18 grader (checkpoint): row L2 normalisation, two kernels against one fused warp-per-row kernel."""

import numpy as np
import pytest

from course import checking
from course.grading import Grader

g = Grader(18)

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "one-dimensional": lambda xs: (xs[0].ravel(),),
        "no-columns": lambda xs: (xs[0][:, :0].copy(),),
    }
)


@pytest.mark.parametrize("version", g.versions)
def test_zero_row_stays_zero(version):
    """A zero row has norm 0: y must be 0 there (divide by max(norm, eps)), never NaN or inf."""
    g.require_implemented(version)
    (x,), _ = g.inputs((4, 70), "zero-row", version)
    x[2] = 0.0
    checking.assert_matches(getattr(g.target, version)(x), g.solution.reference(x), name=version)
    assert np.all(getattr(g.target, version)(x)[2] == 0.0)


def test_optimized_is_one_fused_warp_kernel():
    """v2: one kernel, the norm folded with shuffles, everything in registers (no local memory)."""
    kernels = g.kernels_of("optimized")
    assert list(kernels) == ["optimized"], f"optimized should be one fused kernel, found {list(kernels)}"
    rep = g.report("optimized")
    assert rep.count("shfl.sync") > 0, (
        "optimized: no shfl.sync in the PTX; fold the sum of squares across the warp with warp "
        "shuffles (cuda.shfl_xor_sync, offsets 16, 8, 4, 2, 1) so every lane gets the norm")
    assert not rep.uses_local_memory, f"optimized: {rep.stack_bytes} bytes of stack (local memory)"
    assert rep.spill_stores == rep.spill_loads == 0
    for label in g.kernels_of("naive"):
        assert g.report(label).count("shfl.sync") == 0, f"{label}: the naive version has no shuffles"


@pytest.mark.gpu
def test_optimized_at_bench_size():
    g.run_and_compare("optimized", g.solution.BENCH_SIZES[0])
