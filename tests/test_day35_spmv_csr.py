"""Day 35 grader: SpMV in CSR, scalar (a thread per row) vs vector (a warp per row) vs rows binned by
length (a thread, a warp or several blocks per row). The hard inputs are make_inputs kinds in
TEST_SIZES: every row empty but one, no nonzeros, one row holding most of the matrix, one row, one
column, empty rows interleaved."""

import numpy as np
import pytest

from course import checking
from course.grading import Grader

g = Grader(35)
sol = g.solution

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    n=("power_law", 97),
    extra_cases={
        "indices-shorter-than-indptr-says": lambda xs: (xs[0], xs[1][:-1].copy(), xs[2][:-1].copy(), xs[3]),
        "data-length-differs": lambda xs: (xs[0], xs[1], xs[2][:-1].copy(), xs[3]),
        "empty-indptr": lambda xs: (xs[0][:0].copy(), xs[1][:0].copy(), xs[2][:0].copy(), xs[3]),
        "column-past-x": lambda xs: (xs[0], xs[1], xs[2], xs[3][:int(xs[1].max())].copy()),
        "x-two-dimensional": lambda xs: (xs[0], xs[1], xs[2], np.ascontiguousarray(xs[3][None, :])),
    },
)


@pytest.mark.parametrize("version", sol.VERSIONS)
def test_error_within_row_scale_on_the_laplacian(version):
    """The stencil's rows cancel (4 x_i minus four neighbours): each y[r] is held to float32 rounding of
    sum_j |a_rj x_j|, the scale its terms carry, not of its own small value."""
    g.require_implemented(version)
    inputs, seed = g.inputs(("laplacian", 13), version, "scale")
    indptr, indices, data, x = inputs
    got = checking.to_host(getattr(g.target, version)(*inputs)).astype(np.float64)
    scale = sol.reference(indptr, indices, np.abs(data), x).astype(np.float64)
    err = np.abs(got - sol.reference(*inputs))
    assert not np.isnan(got).any(), f"{version}: NaN in y (a row never written?), seed {seed}"
    worst = int(np.argmax(err / scale))
    assert err[worst] <= 1e-5 * scale[worst], (
        f"{version}: row {worst} off by {err[worst]:.3g}, over 1e-5 of its sum |a x| = {scale[worst]:.3g} "
        f"(seed {seed})")


def test_device_arrays_in_device_arrays_out():
    """Device in, device out (what bench times): the cached bins of one indptr serve later calls."""
    from course import launch

    g.require_implemented("optimized")
    inputs, _ = g.inputs(("dominant", 45), "device")
    d = launch.to_device(*inputs)
    for _ in range(2):
        y = g.target.optimized(*d)
        assert not isinstance(y, np.ndarray), "optimized: device inputs must give a device array back"
        checking.assert_matches(checking.to_host(y), sol.reference(*inputs), name="optimized(device)")


@pytest.mark.parametrize("version", ["vector", "optimized"])
def test_rows_are_folded_with_shuffles(version):
    """A warp's lanes meet through shfl.sync, in registers; nothing in local memory. The scalar kernel has
    no lanes to fold."""
    reps = {label: g.report(label) for label in g.kernels_of(version)}
    assert sum(r.count("shfl.sync") for r in reps.values()) > 0, (
        f"{version}: no shfl.sync in the PTX: fold the lanes' partial sums with cuda.shfl_down_sync")
    for label, r in reps.items():
        assert not r.uses_local_memory, f"{label}: {r.stack_bytes} bytes of stack (local memory)"
    assert g.report("naive").count("shfl.sync") == 0


def test_long_rows_are_split_over_blocks_with_atomics():
    """v3 cuts a long row into chunks, a block each, and adds the block sums into y atomically."""
    labels = g.kernels_of("optimized")
    assert any(g.report(label).count("atom") > 0 and g.report(label).count("bar.sync") > 0 for label in labels), (
        "optimized: no kernel with a block reduction (bar.sync) and an atomic add: a long row needs "
        "several blocks, each adding its chunk's sum into y")


def test_vector_loads_are_coalesced():
    """On rows of tens of nonzeros a warp per row reads each row in whole lines; a thread per row has
    its 32 lanes in 32 rows, each load touching many more sectors."""
    scalar, vec = g.traffic("naive", ("interleaved", 70)), g.traffic("vector", ("interleaved", 70))
    assert vec.global_load_sectors <= 0.6 * scalar.global_load_sectors, (
        f"vector: {vec.global_load_sectors} sectors loaded against the scalar kernel's "
        f"{scalar.global_load_sectors} (the simulator counts about half): let a warp's lanes stride one row together")


def test_binned_version_reads_fewer_sectors_on_short_rows():
    """On the Laplacian (5 nonzeros a row) a warp per row wastes 27 lanes and a request a row; the short
    bin's thread per row keeps a warp's 32 loads on 32 neighbouring rows."""
    vec, opt = g.traffic("vector", ("laplacian", 11)), g.traffic("optimized", ("laplacian", 11))
    assert opt.global_load_requests <= 0.5 * vec.global_load_requests, (
        f"optimized: {opt.global_load_requests} load requests against vector's {vec.global_load_requests} "
        "on rows of 5: give short rows a thread (or a few lanes), not a warp")


@pytest.mark.gpu
@pytest.mark.parametrize("version", sol.VERSIONS)
@pytest.mark.parametrize("n", [("laplacian", 1001), ("power_law", 200_003)], ids=["laplacian", "power_law"])
def test_at_scale(version, n):
    """A million rows of the stencil; 200k power-law rows with rows of thousands on the long path."""
    g.run_and_compare(version, n)
