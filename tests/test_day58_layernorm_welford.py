"""Day 58 grader: LayerNorm, three passes (mean, variance, normalise) vs Welford's one-pass statistics merged
by Chan's rule across the warp and the block, weight and bias fused into the write pass."""

import numpy as np
import pytest

from course import checking, launch
from course.grading import Grader

g = Grader(58)
sol = g.solution

# Rows of length 1 (variance 0: out = bias); rows shorter than a warp; odd rows (the per-element path);
# a multiple of 4 (the 16-byte path); a prime number of long odd rows.
HARD_SHAPES = ((3, 1), (3, 5), (2, 257), (3, 1028), (1, 4097))
ALIGNED = (2, 1024)  # every row a multiple of 4 floats: whole 16-byte groups


def _ids(shapes):
    return [f"{r}x{c}" for r, c in shapes]


test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    (3, 257),
    extra_cases={
        "weight-too-short": lambda xs: (xs[0], xs[1][:-1].copy(), xs[2], xs[3]),
        "bias-too-long": lambda xs: (xs[0], xs[1], np.append(xs[2], np.float32(0.0)), xs[3]),
        "weight-two-dimensional": lambda xs: (xs[0], xs[1][None].copy(), xs[2], xs[3]),
        "eps-negative": lambda xs: (xs[0], xs[1], xs[2], -1e-5),
        "eps-nan": lambda xs: (xs[0], xs[1], xs[2], float("nan")),
        "x-one-dimensional": lambda xs: (np.ascontiguousarray(xs[0][0]), xs[1], xs[2], xs[3]),
        "no-rows": lambda xs: (xs[0][:0].copy(), xs[1], xs[2], xs[3]),
    }
)


def _run(version, inputs):
    g.require_implemented(version)
    return checking.to_host(getattr(g.target, version)(*inputs))


@pytest.mark.parametrize("shape", HARD_SHAPES, ids=_ids(HARD_SHAPES))
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_large_mean_small_spread(version, shape):
    """Rows of mean ~1e4 and spread ~1: E[x^2] - E[x]^2 subtracts two numbers of ~1e8 (float32 spacing 8)
    and loses the variance of 1 entirely. float32 holds the mean itself to ~1e-3 there, so the output is
    held to LARGE_MEAN_ATOL of the spread (times |weight|), not to 1e-4 of each element."""
    inputs = sol.hard_inputs("large-mean", shape)
    got = _run(version, inputs)
    want = sol.reference(*inputs)
    assert not np.isnan(got).any(), (
        f"{version}(mean 1e4, {shape}): NaN in the output: a variance computed as E[x^2] - E[x]^2 in float32 "
        "cancels catastrophically (and can come out negative); accumulate squared deviations (Welford)")
    err = np.abs(got.astype(np.float64) - want) / np.abs(inputs[1]).max()
    assert err.max() <= sol.LARGE_MEAN_ATOL, (
        f"{version}(mean 1e4, spread 1, {shape}): off by {err.max():.3g} of the spread (allowed "
        f"{sol.LARGE_MEAN_ATOL}); at r, k = {np.unravel_index(err.argmax(), err.shape)} expected "
        f"{want.flat[err.argmax()]!r}, got {got.flat[err.argmax()]!r}. Was the variance taken as "
        "E[x^2] - E[x]^2?")


@pytest.mark.parametrize("shape", HARD_SHAPES, ids=_ids(HARD_SHAPES))
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_constant_rows_give_bias(version, shape):
    """Variance 0 (constant rows, and every row of length 1): x - mean is 0, so out = bias, exactly;
    rstd = 1 / sqrt(eps) is large but finite (no division by zero, no NaN)."""
    inputs = sol.hard_inputs("constant", shape)
    got = _run(version, inputs)
    assert np.isfinite(got).all(), f"{version}(constant rows, {shape}): NaN or inf: is eps inside the sqrt?"
    bias = np.broadcast_to(inputs[2], got.shape)
    bad = got != bias
    assert not bad.any(), (
        f"{version}(constant rows, {shape}): {int(bad.sum())} outputs differ from the bias, first at "
        f"{tuple(int(i) for i in np.argwhere(bad)[0])}: a row of variance 0 normalises to 0 exactly")


@pytest.mark.parametrize("shape", ((2, 1028), (3, 257), (1, 4097)), ids=_ids(((2, 1028), (3, 257), (1, 4097))))
def test_welford_is_exact_on_any_constant_row(shape):
    """Welford's merge of equal means has delta = 0: mean exactly the value, M2 exactly 0, out exactly bias,
    whatever the constant. (A float32 sum divided by cols rounds, and rstd ~ 316 amplifies it.)"""
    inputs = sol.hard_inputs("any-constant", shape)
    got = _run("optimized", inputs)
    bias = np.broadcast_to(inputs[2], got.shape)
    assert np.array_equal(got, bias), (
        f"optimized(constant rows {inputs[0][:, 0]}, {shape}): max |out - bias| = "
        f"{np.nanmax(np.abs(got - bias)):.3g}; Welford's running mean of equal values is exact "
        "(each delta is 0): are the statistics merged with Chan's rule?")


@pytest.mark.parametrize("version", sol.VERSIONS)
def test_device_views_off_the_16_byte_grid(version):
    """Rows of 1028 floats (a multiple of 4) seen through device views that start 4 bytes past a 16-byte
    boundary: x as buf[1:] of a flat buffer, weight and bias as w[1:]. 16-byte loads must not be used
    on them (a misaligned address stops a GPU kernel), and the result stays on the device."""
    g.require_implemented(version)
    (x, w, b, eps), seed = g.inputs((3, 1028), version, "view")
    flat = np.concatenate([np.zeros(1, np.float32), x.ravel()])
    d_flat, d_w, d_b = launch.to_device(flat, np.append(np.float32(0.0), w), np.append(np.float32(0.0), b))
    d_x = d_flat[1:].reshape(x.shape)
    for name, args in (("x", (d_x, launch.to_device(w)[0], launch.to_device(b)[0])),
                       ("weight, bias", (launch.to_device(x)[0], d_w[1:], d_b[1:]))):
        got = getattr(g.target, version)(*args, eps)
        assert launch.is_device_array(got), f"{version}: a device array in should give a device array out"
        checking.assert_matches(got, sol.reference(x, w, b, eps), rtol=sol.RTOL,
                                name=f"{version}({name} off the 16-byte grid, seed={seed})")


def _passes(version, n):
    """(loads, stores) in units of x's bytes, counted in the simulator (weight and bias included)."""
    t = g.traffic(version, n)
    x_bytes = n[0] * n[1] * 4
    return 32 * t.global_load_sectors / x_bytes, 32 * t.global_store_sectors / x_bytes


def test_naive_reads_the_row_three_times():
    loads, stores = _passes("naive", ALIGNED)
    # three reads of x, and a weight and a bias element read with every output
    assert 4.9 <= loads <= 5.1, (
        f"naive: {loads:.2f} x's worth of loads; v1 reads x three times, weight and bias once a row")
    assert 0.95 <= stores <= 1.05, f"naive: out written {stores:.2f} times, expected once"


def test_optimized_reads_the_row_twice():
    """Welford's point for the memory: ONE pass for the statistics, one more to write: x read twice (and
    weight and bias with the write), a quarter less global traffic than the three passes, in 16-byte loads."""
    loads, stores = _passes("optimized", ALIGNED)
    naive_loads, _ = _passes("naive", ALIGNED)
    assert loads <= 4.05, (
        f"optimized: {loads:.2f} x's worth of loads (naive: {naive_loads:.2f}); Welford's (n, mean, M2) needs "
        "ONE read of the row, then one more for the write pass (with weight and bias)")
    assert loads >= 3.95, f"optimized: only {loads:.2f} x's worth of loads: every element must be read"
    assert 0.95 <= stores <= 1.05, f"optimized: out written {stores:.2f} times, expected once"
    t = g.traffic("optimized", ALIGNED)
    assert t.sectors_per_load >= 15, (
        f"optimized: {t.sectors_per_load:.1f} sectors a load request on aligned rows; 16-byte loads "
        "(course.wide) give 16 a warp")


def test_optimized_merges_in_registers():
    """The triples travel by shuffle (shfl.sync), the warps' triples meet in shared memory behind a
    barrier, several loads are in flight, and the running statistics stay in registers (no stack)."""
    rep = g.report("optimized")
    assert rep.count("shfl.sync") > 0, "optimized: no shfl.sync: merge the warp's (n, mean, M2) with shuffles"
    assert rep.count("st.shared") > 0 and rep.count("bar.sync") > 0, (
        "optimized: no st.shared / bar.sync: the warps' triples meet in shared memory behind a barrier")
    assert not rep.uses_local_memory, f"optimized: {rep.stack_bytes} bytes of stack (local memory)"
    assert rep.loads_in_flight >= 2, (
        f"optimized: at most {rep.loads_in_flight} global load(s) back to back in the PTX: issue several "
        "independent loads a trip before the arithmetic")


@pytest.mark.gpu
@pytest.mark.parametrize("n", ((4096, 4096), (8192, 1024), (64, 16384), (1021, 4097)), ids=["4k", "1k", "16k", "odd"])
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_large(version, n):
    """Hidden sizes of real models, a long row, and an odd one (the per-element path) on the GPU."""
    g.run_and_compare(version, n)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ("large-mean", "constant"))
def test_hard_inputs_long_rows(kind):
    """The hard inputs at 16k a row on the GPU (float32 arithmetic as the hardware does it)."""
    inputs = sol.hard_inputs(kind, (8, 16384))
    got = _run("optimized", inputs)
    err = np.abs(got.astype(np.float64) - sol.reference(*inputs)) / np.abs(inputs[1]).max()
    assert err.max() <= sol.LARGE_MEAN_ATOL, f"optimized({kind}, 16k): off by {err.max():.3g} of the spread"


@pytest.mark.gpu
def test_library_row():
    """torch.nn.functional.layer_norm, the row the targets compare with (skipped where torch is not installed)."""
    pytest.importorskip("torch")
    g.run_and_compare("library", (1024, 4096))
