"""Day 29 grader: inclusive scan of any length, day 28's three kernels vs one pass with decoupled
look-back (tiles from an atomic counter, a status word a tile: flag and value in one 64-bit word,
aggregates summed until an inclusive prefix, a fence before each publish)."""

import re

import numpy as np
import pytest

from course import checking, launch
from course.grading import Grader

# The int32 scans wrap on purpose (the interface: int32 adds as the GPU does them); in the simulator
# NumPy warns about each wrapped scalar add.
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")

g = Grader(29)
sol = g.solution
TRAFFIC_N = 4 * sol.TILE + 5  # four whole tiles and a ragged fifth: every tile after the first looks back


@pytest.mark.parametrize("n", sol.TEST_SIZES, ids=[str(n) for n in sol.TEST_SIZES])
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_matches_reference(version, n):
    """Both versions at the awkward sizes. The naive version is day 28's, given: it is graded here as
    the row the single pass is compared with, once the day's own kernel is written."""
    g.require_implemented("optimized")
    g.run_and_compare(version, n)


@pytest.mark.parametrize("n", [(1, "int32"), (sol.TILE + 1, "int32"), (11261, "int32")],
                         ids=["1", "tile+1", "11261"])
def test_int32_is_exact(n):
    """int32 over its whole range: nearly every prefix wraps, and the answer must be exact (the
    value's 32 bits go through the status word unchanged)."""
    g.run_and_compare("optimized", n, rtol=0.0)


def test_device_in_device_out():
    """A device array in gives a device array out (how the benchmark times the kernels alone)."""
    g.require_implemented("optimized")
    (x,), seed = g.inputs(2 * sol.TILE + 3, "device")
    got = g.target.optimized(launch.to_device(x)[0])
    assert launch.is_device_array(got), "optimized: a device array in should give a device array out"
    checking.assert_matches(got, sol.reference(x), rtol=sol.RTOL, name=f"optimized(device x, seed={seed})")


test_rejects_bad_inputs = g.rejects_bad_inputs(
    versions=("optimized",),
    extra_cases={
        "two-dimensional": lambda xs: (np.ascontiguousarray(xs[0][None, :]),),
        "int64": lambda xs: (xs[0].astype(np.int64),),
        "empty": lambda xs: (xs[0][:0].copy(),),
    },
)


def _word(flag, value, dtype):
    """A status word as the kernel packs it: the flag in the high 32 bits, the value's bits low."""
    bits = int(np.array([value], dtype=dtype).view(np.uint32)[0])
    return np.uint64((flag << 32) | bits)


# Where the nearest inclusive prefix (P) sits among the 40 tiles before the scanned ones: right
# behind them; 36 tiles back (a second window of 32); at tile 0 (the window hangs past the start).
LOOK_BACK_CASES = {"P-adjacent": 39, "P-36-back": 3, "P-at-tile-0": 0}


@pytest.mark.parametrize("dtype", ["int32", "float32"])
@pytest.mark.parametrize("case", list(LOOK_BACK_CASES))
def test_look_back_adds_aggregates_until_a_prefix(case, dtype):
    """The simulator runs blocks one after another, so a look-back there always finds its predecessor
    done (flag P). Here the status words of 40 earlier tiles are set up by hand: aggregates only (flag
    A) after the nearest P, and wrong values before it, then the kernel scans the 3 tiles after them
    (the counter starts at 40). Right answers need every aggregate after the nearest P, that P's
    prefix, and nothing from before it."""
    g.require_implemented("optimized")
    tile, before = sol.TILE, 40
    n = (before + 3) * tile - 7  # a ragged last tile
    (x,), seed = g.inputs((n, dtype) if dtype == "int32" else n, "look-back", case)
    expected = sol.reference(x)
    sums = x[: before * tile].reshape(before, tile)
    agg = sums.sum(axis=1, dtype=np.int32) if dtype == "int32" else sums.astype(np.float64).sum(axis=1)
    p_tile = LOOK_BACK_CASES[case]
    status = np.zeros(before + 3, dtype=np.uint64)
    for k in range(before):
        if k < p_tile:  # behind the nearest P: a look-back that reads these goes too far
            status[k] = _word(sol.FLAG_P, 12345, x.dtype)
        elif k == p_tile:
            status[k] = _word(sol.FLAG_P, expected[(k + 1) * tile - 1], x.dtype)
        else:
            status[k] = _word(sol.FLAG_A, agg[k], x.dtype)
    d_x, d_status, d_counter = launch.to_device(x, status, np.array([before], dtype=np.int32))
    out = launch.empty((n,), x.dtype)
    g.target.single_pass_kernel[3, sol.THREADS](d_x, out, d_status, d_counter)
    got = out.copy_to_host()[before * tile:]
    report = checking.compare(got, expected[before * tile:], rtol=0.0 if dtype == "int32" else sol.RTOL,
                              name=f"tiles {before}.. after a hand-made look-back ({case})")
    assert report.ok, (f"{report.text}\n  (seed={seed}) the look-back must add the aggregate (flag A) of every "
                       "tile after the nearest P, then that P's prefix, and stop there")
    flags = d_status.copy_to_host()[before:] >> np.uint64(32)
    assert (flags == sol.FLAG_P).all(), (
        f"status flags of the scanned tiles: {flags.tolist()}; each tile ends with FLAG_P (its inclusive prefix)")


def _ptx_lines(label):
    return [ln.split("//")[0].strip() for ln in g.report(label).ptx.splitlines()]


@pytest.mark.parametrize("label", ["optimized", "optimized.int32"])
def test_fence_before_publishing(label):
    """The simulator runs one block at a time and models no memory ordering, so a missing fence cannot
    show there as a wrong sum: the compiler shows it. cuda.threadfence() is `membar.gl` (or a
    `fence.*.gpu`) in the PTX, and it must come before an atomic store of a status word."""
    lines = _ptx_lines(label)
    fence = re.compile(r"^(?:@!?%\w+\s+)?(?:membar\.gl|fence\.\S*(?:gpu|sys))\b")
    publish = re.compile(r"^(?:@!?%\w+\s+)?(?:atom\.global\S*\.(?:exch|cas|or|add)\S*\.[bu]64|"
                         r"st\.(?:release|relaxed)\S*\.[bu]64)\b")
    fences = [i for i, ln in enumerate(lines) if fence.match(ln)]
    publishes = [i for i, ln in enumerate(lines) if publish.match(ln)]
    assert fences, (f"{label}: no memory fence in the PTX; call cuda.threadfence() before publishing a "
                    "status word, so no other block can see the flag before what it announces")
    assert publishes and min(fences) < max(publishes), (
        f"{label}: no 64-bit atomic store of a status word after the fence; publish with cuda.atomic.exch")


@pytest.mark.parametrize("label", ["optimized", "optimized.int32"])
def test_look_back_reads_status_atomically(label):
    """A plain load of a status word in a spin loop may be hoisted or served stale from L1. The
    look-back reads the words whole and fresh: a relaxed (or volatile, or acquire) 64-bit load
    (course.flags.load_relaxed), or a 64-bit atomic (add 0, or, cas)."""
    lines = _ptx_lines(label)
    read = re.compile(r"^(?:@!?%\w+\s+)?(?:atom\.global\S*\.(?:add|or|cas|max|and)\S*\.[bu]64|"
                      r"ld\.(?:volatile|relaxed|acquire)\S*\.[bu]64)\b")
    assert any(read.match(ln) for ln in lines), (
        f"{label}: no relaxed or atomic 64-bit read in the PTX; read status words with "
        "flags.load_relaxed(status, j) (or cuda.atomic.add(status, j, uint64(0)))")


def test_tile_scan_in_registers_and_shuffles():
    """The tile is scanned in registers and warp shuffles, the warps' totals through shared memory
    behind a barrier; tiles come from an atomic counter; nothing in local memory."""
    rep = g.report("optimized")
    assert rep.count("shfl.sync") > 0, "optimized: no shfl.sync; scan each warp's rows with cuda.shfl_up_sync"
    assert rep.count("st.shared") > 0 and rep.count("ld.shared") > 0 and rep.count("bar.sync") >= 2, (
        "optimized: the warps' totals go through shared memory, a barrier before they are read")
    assert rep.count("atom") >= 3, "optimized: atomics for the tile counter, the status reads and the publishes"
    assert rep.stack_bytes == 0, f"optimized: {rep.stack_bytes} bytes of stack frame (local memory)"


def test_one_pass_moves_half_the_bytes():
    """The three-kernel scan reads x, writes out, then reads and writes out again (the add-back): ~16
    bytes an element. One pass reads x once and writes out once, plus a status word a tile."""
    naive, opt = g.traffic("naive", TRAFFIC_N), g.traffic("optimized", TRAFFIC_N)
    minimum = sol.traffic(*sol.make_inputs(TRAFFIC_N))[0]
    assert opt.global_bytes <= 1.15 * minimum, (
        f"optimized: {opt.global_bytes} bytes through global memory for a minimum of {minimum}; read each "
        "element once and write it once")
    assert opt.global_bytes <= 0.65 * naive.global_bytes, (
        f"optimized: {opt.global_bytes} bytes against the three-kernel scan's {naive.global_bytes}")
    assert opt.sectors_per_load <= 4.5, (
        f"optimized: {opt.sectors_per_load:.1f} sectors per load request; a warp's lanes read consecutive elements")


@pytest.mark.gpu
@pytest.mark.parametrize("version", sol.VERSIONS)
@pytest.mark.parametrize("n", [(1 << 24) + 7, ((1 << 24) + 7, "int32")], ids=["float32", "int32"])
def test_at_scale(version, n):
    """2^24 + 7 elements: thousands of tiles in flight at once, so look-backs meet aggregates (flag A)
    and tiles not yet published (flag X), as the simulator never shows."""
    g.run_and_compare(version, n, rtol=0.0 if not isinstance(n, int) else None)


@pytest.mark.gpu
def test_largest_size():
    """2^28 int32, the interface's largest size: exact."""
    g.run_and_compare("optimized", (1 << 28, "int32"), rtol=0.0)

