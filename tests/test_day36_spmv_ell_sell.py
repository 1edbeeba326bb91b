"""Day 36 grader: SpMV in padded formats, day 35's binned CSR vs HYB (column-major ELL + CSR rows) vs
SELL-C-sigma (slices of 32 rows sorted by length, each padded to its longest row). The hard inputs
are make_inputs kinds in TEST_SIZES: every row empty but one, no nonzeros, one row holding most of the
matrix, one row, one column, empty rows interleaved, row counts that are no multiple of 32."""

import numpy as np
import pytest

from course import checking, launch
from course.grading import Grader

g = Grader(36)
sol = g.solution
OWN = ("hyb", "optimized")  # the day's own versions: csr is day 35's, given


@pytest.mark.parametrize("n", sol.TEST_SIZES, ids=[str(n) for n in sol.TEST_SIZES])
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_matches_reference(version, n):
    """Every version on every test matrix; csr (day 35's) is graded as the row the formats are
    compared with, once the day's own kernels are written."""
    g.require_implemented(*OWN)
    g.run_and_compare(version, n)


# csr's input checks are day 35's (its grader tests them).
test_rejects_bad_inputs = g.rejects_bad_inputs(
    n=("power_law", 97),
    versions=OWN,
    extra_cases={
        "indices-shorter-than-indptr-says": lambda xs: (xs[0], xs[1][:-1].copy(), xs[2][:-1].copy(), xs[3]),
        "data-length-differs": lambda xs: (xs[0], xs[1], xs[2][:-1].copy(), xs[3]),
        "empty-indptr": lambda xs: (xs[0][:0].copy(), xs[1][:0].copy(), xs[2][:0].copy(), xs[3]),
        "column-past-x": lambda xs: (xs[0], xs[1], xs[2], xs[3][:int(xs[1].max())].copy()),
        "x-two-dimensional": lambda xs: (xs[0], xs[1], xs[2], np.ascontiguousarray(xs[3][None, :])),
    },
)


@pytest.mark.parametrize("version", OWN)
def test_error_within_row_scale_on_the_laplacian(version):
    """The stencil's rows cancel: each y[r] is held to float32 rounding of sum_j |a_rj x_j|."""
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


@pytest.mark.parametrize("version", OWN)
def test_device_arrays_in_device_arrays_out(version):
    """Device in, device out (what bench times): the plan is made on the device (day 22's histogram,
    day 34's sort), and the cached format of one indptr serves the second call."""
    g.require_implemented(version)
    inputs, _ = g.inputs(("three_paths", 75), "device", version)
    d = launch.to_device(*inputs)
    for _ in range(2):
        y = getattr(g.target, version)(*d)
        assert not isinstance(y, np.ndarray), f"{version}: device inputs must give a device array back"
        checking.assert_matches(checking.to_host(y), sol.reference(*inputs), name=f"{version}(device)")


@pytest.mark.parametrize("sigma", [1, 64])
@pytest.mark.parametrize("n", [("power_law", 300), ("three_paths", 75)], ids=["power_law", "three_paths"])
def test_sorting_windows(sigma, n):
    """sigma = 1 (no sorting: plain SELL-C) and windows of 64 rows (several windows, rows moved within
    each): the permutation must be undone on the write-back wherever it moved a row."""
    g.require_implemented("optimized")
    inputs, seed = g.inputs(n, "sigma", sigma)
    got = g.target.sell_c_sigma(*inputs, sigma=sigma)
    checking.assert_matches(got, sol.reference(*inputs), name=f"sell_c_sigma(sigma={sigma}, seed {seed})")


def test_slices_padded_to_their_longest_row():
    """Each slice is as wide as its longest row (rows over SELL_MAX count 0: they live in the CSR
    lists), no wider: the format holds exactly the slots padding("sell") predicts, and the
    permutation orders every window by length."""
    g.require_implemented("optimized")
    inputs, seed = g.inputs(("power_law", 1500), "format")
    indptr = inputs[0]
    slice_ptr, cols, vals, perm, _ = g.target.sell_format(*inputs[:3])
    slice_ptr, perm = slice_ptr.copy_to_host(), perm.copy_to_host()
    assert np.array_equal(np.sort(perm), np.arange(indptr.size - 1)), "perm is not a permutation of the rows"
    eff = sol.sell_lengths(np.diff(indptr))[perm]
    windows = np.arange(perm.size) // sol.SIGMA
    assert np.array_equal(windows, perm // sol.SIGMA), "perm moves rows between sorting windows"
    widths = np.diff(slice_ptr) // sol.C
    padded = np.concatenate([eff, np.zeros(-eff.size % sol.C, eff.dtype)]).reshape(-1, sol.C)
    short = np.flatnonzero(widths < padded.max(axis=1))
    assert short.size == 0, (
        f"slice {short[0]} is {widths[short[0]]} wide but its longest row holds {padded[short[0]].max()} "
        f"(the first holds {padded[short[0], 0]}): rows cut short (seed {seed})")
    want = sol.padding("sell", indptr)["slots"]
    assert slice_ptr[-1] == want, f"the slices hold {slice_ptr[-1]} slots, padding('sell') predicts {want}"
    assert want < 0.5 * sol.padding("ell", indptr)["slots"], "sliced padding should be far below ELL's"


def test_padded_formats_read_whole_lines_on_the_laplacian():
    """Rows of 3-5 nonzeros: a thread per row in CSR has its lanes in 32 rows, 32 places; column-major
    ELL and SELL put slot k of 32 neighbouring rows in one 128-byte line."""
    from course import ON_GPU, traffic

    if ON_GPU:
        pytest.skip("memory traffic is counted in the simulator; on a GPU, Nsight Compute counts it")
    g.require_implemented("csr", *OWN)
    n = ("laplacian", 11)
    counts = {}
    for version, kernel in (("csr", "spmv_short_kernel"), ("hyb", "spmv_ell_kernel"),
                            ("optimized", "spmv_sell_kernel")):
        (measured,) = traffic.measure_day(g.target, sol, n, versions=[version])
        counts[version] = {k.name: k for k in measured.kernels}[kernel].global_load_sectors
    for version in OWN:
        assert counts[version] <= 0.4 * counts["csr"], (
            f"{version}: {counts[version]} sectors loaded against csr's {counts['csr']} on the Laplacian: store "
            "the padded rows column-major (slot k of neighbouring rows next to each other)")


@pytest.mark.parametrize("label", ["hyb", "optimized"])
def test_spmv_kernels_keep_to_registers(label):
    """Lane = row: nothing to fold across lanes (no shuffles) and nothing in local memory."""
    rep = g.report(label)
    assert not rep.uses_local_memory, f"{label}: {rep.stack_bytes} bytes of stack (local memory)"
    assert rep.count("shfl.sync") == 0, f"{label}: shuffles in a lane-per-row kernel"


@pytest.mark.gpu
@pytest.mark.parametrize("version", sol.VERSIONS)
@pytest.mark.parametrize("n", [("laplacian", 1001), ("power_law", 200_003)], ids=["laplacian", "power_law"])
def test_at_scale(version, n):
    """A million rows of the stencil (several sorting windows); 200k power-law rows with rows of
    thousands on day 35's long path."""
    g.run_and_compare(version, n)
