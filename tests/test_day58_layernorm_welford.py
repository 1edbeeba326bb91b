"""Day 58 grader: LayerNorm, three passes (mean, variance, normalise) vs Welford's one-pass statistics merged
by Chan's rule across the warp and the block, weight and bias fused into the write pass."""

import functools

import numpy as np
import pytest

from course import checking, compiler, days, launch
from course.grading import Grader

g = Grader(58)
sol = g.solution

# Rows of length 1 (variance 0: out = bias); rows shorter than a warp; odd rows (the per-element path);
# a multiple of 4 (the 16-byte path); a prime number of long odd rows.
HARD_SHAPES = ((3, 1), (3, 5), (2, 257), (3, 1028), (1, 4097))
ALIGNED = (2, 1024)  # every row a multiple of 4 floats: whole 16-byte groups
BLOCK_ALIGNED = (2, 4608)  # past the warp kernel's limit: optimized takes the block's Welford kernel


def _ids(shapes):
    return [f"{r}x{c}" for r, c in shapes]


def takes(version, n):
    """Whether the version takes rows of n[1] floats (fresh arrays: aligned when cols % 4 == 0)."""
    limit = sol.max_cols(version, n[1] % 4 == 0)
    return limit is None or n[1] <= limit


def _pairs(versions, shapes):
    return [(v, n) for v in versions for n in shapes if takes(v, n)]


def _pair_ids(pairs):
    return [f"{v}-{r}x{c}" for v, (r, c) in pairs]


test_matches_reference = g.matches_reference(versions=[v for v in sol.VERSIONS if v != "warp_rows"])
# The warp kernel at its own awkward sizes (class limits -1 / exactly / +1, both layouts, more rows than a
# block has warps), and optimized there too (the dispatch's warp side).
test_warp_rows_matches_reference = g.matches_reference(sol.WARP_TEST_SIZES, versions=["warp_rows", "optimized"])
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


HARD_PAIRS = _pairs(sol.VERSIONS, HARD_SHAPES + ((2, 4100),))


@pytest.mark.parametrize(("version", "shape"), HARD_PAIRS, ids=_pair_ids(HARD_PAIRS))
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


@pytest.mark.parametrize(("version", "shape"), HARD_PAIRS, ids=_pair_ids(HARD_PAIRS))
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


EXACT_PAIRS = _pairs(("warp_rows", "optimized"), ((2, 1028), (3, 257), (5, 33), (1, 4097), (2, 4100)))


@pytest.mark.parametrize(("version", "shape"), EXACT_PAIRS, ids=_pair_ids(EXACT_PAIRS))
def test_welford_is_exact_on_any_constant_row(version, shape):
    """Welford's merge of equal means has delta = 0: mean exactly the value, M2 exactly 0, out exactly bias,
    whatever the constant. (A float32 sum divided by cols rounds, and rstd ~ 316 amplifies it.) The warp
    kernel's lanes take deviations from their first value: 0 on a constant row, so the same holds."""
    inputs = sol.hard_inputs("any-constant", shape)
    got = _run(version, inputs)
    bias = np.broadcast_to(inputs[2], got.shape)
    assert np.array_equal(got, bias), (
        f"{version}(constant rows {inputs[0][:, 0]}, {shape}): max |out - bias| = "
        f"{np.nanmax(np.abs(got - bias)):.3g}; Welford's running mean of equal values is exact "
        "(each delta is 0): are the statistics merged with Chan's rule?")


VIEW_CASES = [(v, 1028) for v in ("naive", "optimized")] + [(v, 260) for v in ("warp_rows", "optimized")]


@pytest.mark.parametrize(("version", "cols"), VIEW_CASES, ids=[f"{v}-{c}" for v, c in VIEW_CASES])
def test_device_views_off_the_16_byte_grid(version, cols):
    """Rows of 1028 or 260 floats (multiples of 4) seen through device views that start 4 bytes past a
    16-byte boundary: x as buf[1:] of a flat buffer, weight and bias as w[1:]. 16-byte loads must not be
    used on them (a misaligned address stops a GPU kernel), and the result stays on the device."""
    g.require_implemented(version)
    (x, w, b, eps), seed = g.inputs((3, cols), version, "view")
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
    weight and bias with the write), a quarter less global traffic than the three passes, in 16-byte loads.
    (The block kernel: rows longer than the warp kernel holds.)"""
    loads, stores = _passes("optimized", BLOCK_ALIGNED)
    naive_loads, _ = _passes("naive", BLOCK_ALIGNED)
    assert loads <= 4.05, (
        f"optimized: {loads:.2f} x's worth of loads (naive: {naive_loads:.2f}); Welford's (n, mean, M2) needs "
        "ONE read of the row, then one more for the write pass (with weight and bias)")
    assert loads >= 3.95, f"optimized: only {loads:.2f} x's worth of loads: every element must be read"
    assert 0.95 <= stores <= 1.05, f"optimized: out written {stores:.2f} times, expected once"
    t = g.traffic("optimized", BLOCK_ALIGNED)
    assert t.sectors_per_load >= 15, (
        f"optimized: {t.sectors_per_load:.1f} sectors a load request on aligned rows; 16-byte loads "
        "(course.wide) give 16 a warp")


@pytest.mark.parametrize("version", ("warp_rows", "optimized"))
@pytest.mark.parametrize("n", ((9, 1024), (2, 4096), (5, 512)), ids=["1024", "4096", "512"])
def test_warp_rows_read_x_once(version, n):
    """The row held in registers: x read ONCE (the block kernel reads it twice), weight and bias with the
    write (counted with every row here; after the first row they are L1 hits), out written once, all in
    16-byte accesses."""
    loads, stores = _passes(version, n)
    assert 2.95 <= loads <= 3.05, (
        f"{version}{n}: {loads:.2f} x's worth of loads; expected 3 (x once, weight and bias once a row): "
        "hold the row in registers and write the output from them")
    assert 0.95 <= stores <= 1.05, f"{version}{n}: out written {stores:.2f} times, expected once"
    t = g.traffic(version, n)
    assert t.sectors_per_load >= 15, f"{version}{n}: {t.sectors_per_load:.1f} sectors a load: use wide.load4"


@pytest.mark.parametrize("label", ("warp_rows", "warp_rows.1024", "warp_rows.ragged"))
def test_warp_rows_share_nothing(label):
    """A row per warp: the triples meet by xor shuffles (no shared memory, no barrier), the held row is
    registers (no stack frame), and the aligned kernels load and store 16 bytes a lane, all the row's
    loads back to back."""
    rep = g.report(label)
    assert rep.count("bar.sync") == 0, f"{label}: a block barrier; a warp's shuffles need none"
    assert rep.shared_bytes == 0 and rep.count("st.shared") == 0, f"{label}: {rep.shared_bytes} B of shared memory"
    assert not rep.uses_local_memory, (
        f"{label}: {rep.stack_bytes} bytes of stack (local memory): index the held row only with constants")
    assert rep.count("shfl.sync") >= 15, f"{label}: {rep.count('shfl.sync')} shfl.sync: 5 steps x 3 values"
    if label != "warp_rows.ragged":
        groups = sol.WARP_GROUPS[-1] if label == "warp_rows" else 8
        assert rep.count("vector ld/st") >= 4 * groups, (
            f"{label}: {rep.count('vector ld/st')} vector ld/st, expected >= {4 * groups}: x, weight, bias "
            "and out a group each in 16 bytes (course.wide)")
        assert rep.loads_in_flight >= groups, (
            f"{label}: {rep.loads_in_flight} loads back to back; the row's {groups} 16-byte loads should all "
            "be issued before the arithmetic (no branch around them)")


def test_split_kernel_meets_behind_a_barrier():
    """The split kernel (optimized from 1028 to 4096 floats): the warps of a row meet behind a barrier,
    and a row's 16-byte loads go out back to back."""
    rep = g.report("optimized.split")
    groups = sol.split_groups(sol.WARP_COLS)
    assert rep.count("bar.sync") >= 1, "optimized.split: no barrier: the row's warps meet in shared memory"
    assert rep.loads_in_flight >= groups, (
        f"optimized.split: {rep.loads_in_flight} loads back to back; a row's {groups} 16-byte loads a thread "
        "should go out together")


@functools.cache
def prefetching():
    """The solution with SPLIT_PREFETCH = True at 8 warps a row (course.days.with_constants): the form
    that is faster on an H100 and slower on the H200 (lesson 58), graded like the default."""
    return days.with_constants(58, SPLIT_PREFETCH=True, SPLIT_WARPS=8)


@pytest.mark.parametrize("n", ((5, 1028), (7, 2052), (3, 4096)), ids=str)
def test_prefetching_split_kernel_matches_reference(n):
    """Rows of the split kernel's whole range, several a block (the simulator's grid is 2 blocks), so both
    register buffers take rows and the last trip loads nothing more."""
    g.require_implemented("optimized")
    xs, seed = g.inputs(n, "prefetch")
    checking.assert_matches(prefetching().optimized(*xs), sol.reference(*xs), rtol=sol.RTOL,
                            name=f"SPLIT_PREFETCH, {n} (seed {seed})")


def test_prefetching_split_kernel_loads_the_next_row_early():
    """With the prefetch x is loaded in three runs: the first row's before the loop, then the next row's
    in each of the loop's two trips. Where in a trip the prefetch sits (before the stores, not after) is a
    matter of speed: the benchmark and lesson 58 measure it."""
    g.require_implemented("optimized")
    variant = prefetching()
    rep = compiler.reports(variant)["optimized.split"]
    groups = variant.split_groups(variant.WARP_COLS)
    x_loads = rep.count("ld.global") - 2 * 2 * groups  # less weight and bias, read by each trip's stores
    assert x_loads >= 3 * groups, (
        f"optimized.split: {x_loads} loads of x in the PTX, expected >= {3 * groups}: the first row's, then "
        "the next row's in each of the loop's two trips")


@pytest.mark.parametrize(("version", "n"), (("warp_rows", (2, 4100)), ("warp_rows", (2, 513))),
                         ids=["4100", "ragged-513"])
def test_warp_rows_past_the_limit_raises(version, n):
    """The warp kernel takes only rows it holds: beyond, ValueError naming the limit and optimized."""
    g.require_implemented(version)
    inputs, _ = g.inputs(n, version, "limit")
    with pytest.raises(ValueError) as err:
        getattr(g.target, version)(*inputs)
    assert "optimized" in str(err.value), f"{version}{n}: the ValueError should point to optimized"


def test_dispatch():
    """optimized takes the warp kernel where it holds the row (one read of x), the block kernel beyond."""
    g.require_implemented("optimized")
    for n, want in (((2, 4096), "warp_rows"), ((2, 4100), None)):
        got = g.traffic("optimized", n)
        if want:
            ref = g.traffic(want, n)
            assert got.global_load_requests == ref.global_load_requests, (
                f"optimized{n}: {got.global_load_requests} load requests, the warp kernel makes "
                f"{ref.global_load_requests}")
        else:
            loads, _ = _passes("optimized", n)
            assert loads >= 3.95, f"optimized{n}: {loads:.2f} x's worth of loads: the block kernel reads x twice"


def test_optimized_merges_in_registers():
    """The block kernel (label optimized): the triples travel by shuffle (shfl.sync), the warps' triples meet
    in shared memory behind a barrier, several loads are in flight, no stack."""
    rep = g.report("optimized")
    assert rep.count("shfl.sync") > 0, "optimized: no shfl.sync: merge the warp's (n, mean, M2) with shuffles"
    assert rep.count("st.shared") > 0 and rep.count("bar.sync") > 0, (
        "optimized: no st.shared / bar.sync: the warps' triples meet in shared memory behind a barrier")
    assert not rep.uses_local_memory, f"optimized: {rep.stack_bytes} bytes of stack (local memory)"
    assert rep.loads_in_flight >= 2, (
        f"optimized: at most {rep.loads_in_flight} global load(s) back to back in the PTX: issue several "
        "independent loads a trip before the arithmetic")


LARGE_PAIRS = _pairs(sol.VERSIONS, ((4096, 4096), (8192, 1024), (64, 16384), (1021, 4097), (4099, 2052),
                                    (8191, 300), (1000, 4100)))


@pytest.mark.gpu
@pytest.mark.parametrize(("version", "n"), LARGE_PAIRS, ids=_pair_ids(LARGE_PAIRS))
def test_large(version, n):
    """Hidden sizes of real models, a long row, odd ones (the per-element paths), the warp kernel's middle
    class and the block kernel just past the warp's limit, on the GPU."""
    g.run_and_compare(version, n)


@pytest.mark.gpu
@pytest.mark.parametrize("cols", (16384, 4096, 1024))
@pytest.mark.parametrize("kind", ("large-mean", "constant"))
def test_hard_inputs_long_rows(kind, cols):
    """The hard inputs at 16k (the block kernel), 4k and 1k (the warp kernel) a row on the GPU (float32
    arithmetic as the hardware does it)."""
    inputs = sol.hard_inputs(kind, (8, cols))
    got = _run("optimized", inputs)
    err = np.abs(got.astype(np.float64) - sol.reference(*inputs)) / np.abs(inputs[1]).max()
    assert err.max() <= sol.LARGE_MEAN_ATOL, f"optimized({kind}, 16k): off by {err.max():.3g} of the spread"


@pytest.mark.gpu
def test_library_row():
    """torch.nn.functional.layer_norm, the row the targets compare with (skipped where torch is not installed)."""
    pytest.importorskip("torch")
    g.run_and_compare("library", (1024, 4096))
