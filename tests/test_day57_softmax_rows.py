"""Day 57 grader: softmax II, a row per thread vs a row per warp (shuffles) vs a row per block, the row
held in registers (one read of x, one write), and the dispatch by cols."""

import numpy as np
import pytest

from course import checking, launch
from course.grading import Grader

g = Grader(57)
sol = g.solution

# Rows of length 1; short and odd (4-byte loads); a warp's limit; the block's last class and the online
# fallback beyond it (the dispatch limits +-1), one row each.
HARD_SHAPES = ((4, 1), (3, 5), (2, 1024), (1, 4097))
LIMITS = ((1, 32767), (1, 32768), (1, 32769))
HELD = ("warp_rows", "block_rows")


def takes(version, n):
    """Whether the version takes rows of n[1] floats (warp_rows and block_rows raise past their limit)."""
    limit = sol.max_cols(version)
    return limit is None or n[1] <= limit


def _pairs(versions, shapes):
    """(version, shape) for every shape the version takes."""
    return [(v, n) for v in versions for n in shapes if takes(v, n)]


def _pair_ids(pairs):
    return [f"{v}-{r}x{c}" for v, (r, c) in pairs]


test_matches_reference = g.matches_reference(versions=[v for v in sol.VERSIONS if v != "warp_rows"])
test_warp_rows_matches_reference = g.matches_reference(
    [n for n in sol.TEST_SIZES if takes("warp_rows", n)], versions=["warp_rows"])
test_rejects_bad_inputs = g.rejects_bad_inputs(
    (2, 1023),
    extra_cases={
        "one-dimensional": lambda xs: (np.ascontiguousarray(xs[0][0]),),
        "three-dimensional": lambda xs: (np.ascontiguousarray(xs[0][None]),),
        "no-rows": lambda xs: (xs[0][:0].copy(),),
        "no-columns": lambda xs: (xs[0][:, :0].copy(),),
    }
)


def _run(version, x):
    g.require_implemented(version)
    return checking.to_host(getattr(g.target, version)(x))


LIMIT_PAIRS = _pairs(("block_rows", "optimized"), LIMITS)


@pytest.mark.parametrize(("version", "n"), LIMIT_PAIRS, ids=_pair_ids(LIMIT_PAIRS))
def test_block_limit(version, n):
    """The block kernel's largest class (1024 threads x 32 floats) at 32767 and 32768 floats a row, and
    (optimized) the online kernel of day 56 at 32769."""
    g.run_and_compare(version, n)


@pytest.mark.parametrize(("version", "n"), (("warp_rows", (2, 1025)), ("warp_rows", (1, 4096)),
                                            ("block_rows", (1, 32769))),
                         ids=["warp_rows-1025", "warp_rows-4096", "block_rows-32769"])
def test_past_the_limit_raises(version, n):
    """A held kernel takes only the rows it can hold: past its limit, ValueError naming the limit and
    `optimized` (which dispatches), never a silent hand-over to another kernel (a benchmark row named
    warp_rows would then time day 56's kernel)."""
    g.require_implemented(version)
    (x,), _ = g.inputs(n, version, "limit")
    with pytest.raises(ValueError) as err:
        getattr(g.target, version)(x)
    text = str(err.value)
    assert str(sol.max_cols(version)) in text and "optimized" in text, (
        f"{version}{n}: the ValueError should name the limit ({sol.max_cols(version)}) and optimized, got {text!r}")
    why = sol.bench_skip(version, (4096, n[1]))
    assert why, f"bench_skip({version!r}, cols={n[1]}) should give a reason: the version cannot run there"


def test_bench_skip():
    """The benchmark times each version only where it runs: warp_rows is left out at (4096, 32768)."""
    g.require_implemented("warp_rows", "block_rows")
    skipped = {(v, n) for n in sol.BENCH_SIZES for v in sol.VERSIONS if sol.bench_skip(v, n)}
    assert skipped == {("warp_rows", (4096, 32768))}, f"bench_skip leaves out {sorted(skipped)}"


HARD_PAIRS = _pairs(sol.VERSIONS, HARD_SHAPES)


@pytest.mark.parametrize("kind", sol.HARD_KINDS)
@pytest.mark.parametrize(("version", "shape"), HARD_PAIRS, ids=_pair_ids(HARD_PAIRS))
def test_hard_inputs(version, kind, shape):
    """Day 56's hard inputs: logits of +-1e4, rows all -inf but one, fully masked rows (all 0), constant
    rows, ramps."""
    (x,) = sol.hard_inputs(kind, shape)
    got = _run(version, x)
    assert not np.isnan(got).any(), (
        f"{version}({kind}, {shape}): NaN in the output; exponents against max_or_zero(m), 1 / s only "
        "where s > 0, and a thread's rescaling exp(m - M) (not exp(0 - M)) where it held only -inf")
    assert np.isfinite(got).all(), f"{version}({kind}, {shape}): inf in the output: was the row max subtracted?"
    checking.assert_matches(got, sol.reference(x), rtol=sol.RTOL, name=f"{version}({kind}, {shape})")
    masked = np.isneginf(x)
    assert (got[masked] == 0).all(), f"{version}({kind}, {shape}): a -inf logit must give exactly 0"
    live = ~masked.all(axis=1)
    sums = got[live].astype(np.float64).sum(axis=1)
    assert np.allclose(sums, 1.0, atol=1e-4), f"{version}({kind}, {shape}): rows sum to {sums}, not 1"


@pytest.mark.parametrize("version", HELD)
def test_device_view_off_the_16_byte_grid(version):
    """x[1:] of rows of 256 floats starts 1 KB in (aligned), of 255 floats 4 bytes past a boundary: the
    16-byte loads only where they fit; the result stays on the device."""
    g.require_implemented(version)
    for cols in (255, 256):
        (x,), seed = g.inputs((4, cols), version, "view")
        (d_x,) = launch.to_device(x)
        got = getattr(g.target, version)(d_x[1:])
        assert launch.is_device_array(got), f"{version}: a device array in should give a device array out"
        checking.assert_matches(got, sol.reference(x[1:]), rtol=sol.RTOL, name=f"{version}(x[1:], cols={cols})")


def _passes(version, n):
    t = g.traffic(version, n)
    x_bytes = n[0] * n[1] * 4
    return 32 * t.global_load_sectors / x_bytes, 32 * t.global_store_sectors / x_bytes, t


@pytest.mark.parametrize("n", ((9, 1024), (3, 1023), (2, 4096)), ids=["aligned", "ragged", "4096"])
@pytest.mark.parametrize("version", HELD)
def test_held_rows_read_x_once(version, n):
    """The point of the day: the row stays in registers between the max/sum and the write, so x is read
    ONCE (day 56's online kernel read it twice): 8 bytes an element through memory, the minimum."""
    if version == "warp_rows" and n[1] > sol.WARP_COLS:
        n = (n[0], sol.WARP_COLS)
    reads, writes, t = _passes(version, n)
    # Rows of 1023 floats start anywhere in a 32-byte sector: a warp's 128 bytes then touch 5 sectors, not
    # 4, and two rows share a sector at their seam (counted for each): up to 1.25x, not a second read.
    most = 1.05 if n[1] % 8 == 0 else 1.3
    assert 0.95 <= reads <= most, (
        f"{version}{n}: x read {reads:.2f} times; hold the row in registers and write the output from "
        "them: one read")
    assert 0.95 <= writes <= most, f"{version}{n}: out written {writes:.2f} times, expected once"
    assert t.global_bytes <= most * 8 * n[0] * n[1], f"{version}{n}: {t.global_bytes} B, minimum {8 * n[0] * n[1]}"


def test_naive_is_uncoalesced():
    """A row per thread: a warp's load touches a sector per lane (its rows lie cols apart)."""
    _, _, t = _passes("naive", (64, 33))
    assert t.sectors_per_load >= 16, f"naive: {t.sectors_per_load:.1f} sectors a load; one thread walks one row"


@pytest.mark.parametrize("label", ("warp_rows", "warp_rows.ragged", "block_rows", "block_rows.ragged"))
def test_held_rows_stay_in_registers(label):
    """The held row is registers, not local memory (a constant-size buffer, constant indices after
    unrolling), and the reductions are shuffles."""
    rep = g.report(label)
    assert not rep.uses_local_memory, (
        f"{label}: {rep.stack_bytes} bytes of stack (local memory): index the held row only with "
        "constants (unrolled for loops over a size fixed when the kernel compiles)")
    assert rep.count("shfl.sync") >= 10, f"{label}: {rep.count('shfl.sync')} shfl.sync: reduce by warp shuffles"


def test_warp_rows_share_nothing():
    """A row per warp needs no shared memory and no barrier; the 16-byte kernel loads 16 bytes a lane."""
    rep = g.report("warp_rows")
    assert rep.count("bar.sync") == 0, "warp_rows: a block barrier; a warp's shuffles need none"
    assert rep.shared_bytes == 0, f"warp_rows: {rep.shared_bytes} bytes of shared memory"
    assert rep.count("vector ld/st") >= 2, "warp_rows: no 16-byte loads (course.wide.load4) in the aligned kernel"


def test_block_rows_one_barrier_a_row():
    """The block's pairs meet in shared memory; one barrier a row suffices with the slots alternating."""
    rep = g.report("block_rows")
    assert rep.count("bar.sync") >= 1, "block_rows: no barrier around the shared slots"
    assert rep.shared_bytes > 0, "block_rows: the warps' pairs meet in shared memory"


def test_dispatch():
    """optimized picks the warp kernel up to WARP_COLS, the block kernel up to BLOCK_COLS."""
    g.require_implemented("optimized")
    assert sol.warp_groups(sol.WARP_COLS) == sol.WARP_GROUPS[-1]
    for n in ((2, 1024), (2, 1025)):
        want = _passes("warp_rows" if n[1] <= sol.WARP_COLS else "block_rows", n)[2]
        got = _passes("optimized", n)[2]
        assert got.global_load_requests == want.global_load_requests, (
            f"optimized{n}: {got.global_load_requests} load requests, the "
            f"{'warp' if n[1] <= sol.WARP_COLS else 'block'} kernel makes {want.global_load_requests}")


LARGE_PAIRS = _pairs(("block_rows", "warp_rows", "optimized"),
                     ((64, 131072), (1024, 32768), (4096, 16384), (32768, 1024), (16384, 1023)))


@pytest.mark.gpu
@pytest.mark.parametrize(("version", "n"), LARGE_PAIRS, ids=_pair_ids(LARGE_PAIRS))
def test_large(version, n):
    """A 128k vocabulary (the online fallback), 32k and 16k rows (block classes), attention rows."""
    g.run_and_compare(version, n)


@pytest.mark.gpu
def test_naive_large():
    g.run_and_compare("naive", (4096, 1024))


@pytest.mark.gpu
@pytest.mark.parametrize("kind", sol.HARD_KINDS)
@pytest.mark.parametrize("cols", (1024, 32768, 131072))
def test_hard_inputs_long_rows(kind, cols):
    (x,) = sol.hard_inputs(kind, (8, cols))
    got = _run("optimized", x)
    assert not np.isnan(got).any(), f"optimized({kind}, {cols}): NaN in the output"
    checking.assert_matches(got, sol.reference(x), rtol=sol.RTOL, name=f"optimized({kind}, {cols})")


@pytest.mark.gpu
def test_library_row():
    pytest.importorskip("torch")
    g.run_and_compare("library", (1024, 32768))
