"""Day 22 grader: a 256-bin byte histogram, global atomics vs privatized and coarsened shared bins."""

import re

import numpy as np
import pytest

from course import checking, cuda
from course.grading import Grader

g = Grader(22)
sol = g.solution

# Instruction starts (after an optional predicate): a global (or generic) load of a 32- or 64-bit word
# or a vector.
_WIDE_LOAD = re.compile(r"^\s*(?:@!?%\w+\s+)?ld(?:\.global)?(?:\.nc)?(?:\.v[248])?\.[usb](?:32|64)\b", re.M)

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={"data-2d": lambda xs: (np.ascontiguousarray(xs[0][None, :]),)}
)


def _compare(version, data, what):
    g.require_implemented(version)
    got = getattr(g.target, version)(data)
    report = checking.compare(got, sol.reference(data), name=f"{version}({what}, n={data.size})")
    assert report.ok, report.text


@pytest.mark.parametrize("value", [0, 255])
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_all_equal_bytes(version, value):
    """Every byte the same: all the atomics of a warp aim at one bin."""
    _compare(version, np.full(4099, value, dtype=np.uint8), f"all {value}")


@pytest.mark.parametrize("version", sol.VERSIONS)
def test_skewed_bytes(version):
    """Hot bins: half the bytes 0, a quarter 1, ... (a steep geometric law)."""
    (data,) = sol.skewed_inputs(4099, seed=22)
    _compare(version, data, "skewed")


def test_optimized_over_several_blocks_and_trips():
    """More chunks than one pass of the grid: each thread takes LOADS chunks at once, then single
    ones (a few threads a second full trip), and a ragged tail of bytes past the last whole chunk."""
    threads = sol.BLOCKS_PER_SM * sol.OPT_THREADS  # the simulator's grid: one SM
    n = (sol.LOADS + 1) * threads * sol.CHUNK + 5 * sol.CHUNK + 3
    g.run_and_compare("optimized", n)


def test_optimized_device_view_at_an_odd_offset():
    """A device view that starts 3 bytes into its allocation: the bytes before the first aligned chunk
    are counted too (on a GPU a misaligned 16-byte load would fault; the simulator raises)."""
    g.require_implemented("optimized")
    (buf,) = sol.make_inputs(1000, seed=3)
    out = g.target.optimized(cuda.to_device(buf)[3:])
    report = checking.compare(checking.to_host(out), sol.reference(buf[3:]), name="optimized(view at +3)")
    assert report.ok, report.text


def test_privatized_versions_count_in_shared_memory():
    """The day's idea: the counting atomics go to shared memory, behind barriers (zeroing before,
    merge after); the naive kernel's only atomics are global."""
    naive = g.report("naive")
    assert naive.count("atom") > 0, "naive: no atomic: concurrent increments of one bin are lost"
    assert naive.count("atom.shared") == 0, "naive: shared atomics in the naive version"
    for version in ("privatized", "optimized"):
        rep = g.report(version)
        assert rep.count("atom.shared") > 0, f"{version}: no atom.shared: count into shared bins"
        assert rep.count("bar.sync") >= 2, (
            f"{version}: {rep.count('bar.sync')} barrier(s): one after zeroing the bins, one before the merge")
        assert rep.stack_bytes == 0, f"{version}: {rep.stack_bytes} bytes of stack frame (local memory)"


def test_optimized_reads_wide_words():
    """Coarsened: the bytes arrive as 4-, 8- or 16-byte words, so a warp's load request carries 128 to
    512 bytes (4 to 16 sectors) instead of 32 (1 sector)."""
    rep = g.report("optimized")
    assert _WIDE_LOAD.search(rep.ptx), "optimized: no 32- or 64-bit global load: read the bytes as words"
    opt = g.traffic("optimized")
    assert opt.sectors_per_load >= 3, (
        f"optimized: {opt.sectors_per_load:.1f} sectors per global load request: the data is still read a "
        "byte a lane (1 sector per request); view it as uint32 or uint64 words")


def test_optimized_merges_once_per_block():
    """Global atomics per block, not per byte: the optimized version's global read-modify-writes are a
    small fraction of the naive version's."""
    naive, opt = g.traffic("naive"), g.traffic("optimized")
    assert opt.global_store_requests * 4 <= naive.global_store_requests, (
        f"optimized: {opt.global_store_requests} global store/atomic requests against naive's "
        f"{naive.global_store_requests}: count into shared bins and merge each block's bins once")


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["uniform", "all-equal", "skewed"])
def test_optimized_at_benchmark_scale(kind):
    n = (1 << 24) + 7
    if kind == "uniform":
        g.run_and_compare("optimized", n)
        return
    data = np.full(n, 42, dtype=np.uint8) if kind == "all-equal" else sol.skewed_inputs(n, seed=7)[0]
    _compare("optimized", data, kind)
