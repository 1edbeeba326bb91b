"""Day 56 grader: softmax I, three passes over the row vs the online softmax (one read pass + one write pass),
then the online softmax with the row held in registers (one read)."""

import numpy as np
import pytest

from course import checking, launch
from course.grading import Grader

g = Grader(56)
sol = g.solution

# Rows of length 1; rows shorter than a warp, of odd length (off the 16-byte grid); a long row.
HARD_SHAPES = ((4, 1), (3, 5), (1, 4097))
ALIGNED = (2, 1024)  # every row a multiple of 4 floats: whole 16-byte groups, no head or tail

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    (2, 1031),  # two rows: a strided view of one row would still be contiguous
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


@pytest.mark.parametrize("shape", HARD_SHAPES, ids=[f"{r}x{c}" for r, c in HARD_SHAPES])
@pytest.mark.parametrize("kind", sol.HARD_KINDS)
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_hard_inputs(version, kind, shape):
    """Logits of +-1e4 (exp without the max subtraction overflows), rows all -inf but one element (that
    element gets 1, the rest exactly 0), fully masked rows (0 everywhere: this course's choice, not
    torch's NaN), constant rows (1 / cols each), and ramps whose max grows at every step."""
    (x,) = sol.hard_inputs(kind, shape)
    got = _run(version, x)
    want = sol.reference(x)
    assert not np.isnan(got).any(), (
        f"{version}({kind}, {shape}): NaN in the output; exp(-inf - -inf) is NaN: take exponents against "
        "max_or_zero(m), and multiply by 1 / s only where s > 0")
    assert np.isfinite(got).all(), f"{version}({kind}, {shape}): inf in the output: was the row max subtracted?"
    checking.assert_matches(got, want, rtol=sol.RTOL, name=f"{version}({kind}, {shape})")
    masked = np.isneginf(x)
    assert (got[masked] == 0).all(), f"{version}({kind}, {shape}): a -inf logit must give exactly 0"
    live = ~masked.all(axis=1)
    sums = got[live].astype(np.float64).sum(axis=1)
    assert np.allclose(sums, 1.0, atol=1e-4), f"{version}({kind}, {shape}): rows sum to {sums}, not 1"


@pytest.mark.parametrize("version", sol.VERSIONS)
def test_device_view_off_the_16_byte_grid(version):
    """A device view x[1:] of rows of 257 floats starts 4 bytes past a 16-byte boundary: wide loads must
    find each row's aligned body (or not be used), and the result stays on the device."""
    g.require_implemented(version)
    (x,), seed = g.inputs((3, 257), version, "view")
    (d_x,) = launch.to_device(x)
    got = getattr(g.target, version)(d_x[1:])
    assert launch.is_device_array(got), f"{version}: a device array in should give a device array out"
    checking.assert_matches(got, sol.reference(x[1:]), rtol=sol.RTOL, name=f"{version}(x[1:], seed={seed})")


def _read_passes(version, n):
    t = g.traffic(version, n)
    x_bytes = n[0] * n[1] * 4
    return 32 * t.global_load_sectors / x_bytes, 32 * t.global_store_sectors / x_bytes


def test_naive_reads_the_row_three_times():
    reads, writes = _read_passes("naive", ALIGNED)
    assert 2.9 <= reads <= 3.1, f"naive: x read {reads:.2f} times; v1 makes three passes (max, sum, write)"
    assert 0.95 <= writes <= 1.05, f"naive: out written {writes:.2f} times, expected once"


@pytest.mark.parametrize("n", (ALIGNED, (1, 4097)), ids=["aligned", "ragged"])
def test_online_reads_the_row_twice(n):
    """The online softmax's point: one read pass for (m, s), one read + write pass for the output."""
    reads, writes = _read_passes("online", n)
    assert reads <= 2.05, (
        f"online: x read {reads:.2f} times from global memory; the running max and rescaled sum need "
        "ONE pass, then one more to write: two reads in all")
    assert reads >= 1.95, f"online: x read only {reads:.2f} times: every element must be read"
    assert 0.95 <= writes <= 1.05, f"online: out written {writes:.2f} times, expected once"


@pytest.mark.parametrize("n", (ALIGNED, (9, 2048), (2, 4096)), ids=["1024", "2048", "4096"])
def test_optimized_reads_the_row_once(n):
    """The row held in registers: x read ONCE, out written once from the registers, 16-byte accesses."""
    reads, writes = _read_passes("optimized", n)
    assert 0.95 <= reads <= 1.05, (
        f"optimized{n}: x read {reads:.2f} times; hold the row in registers and write the output from them")
    assert 0.95 <= writes <= 1.05, f"optimized{n}: out written {writes:.2f} times, expected once"
    t = g.traffic("optimized", n)
    assert t.sectors_per_load >= 15, f"optimized{n}: {t.sectors_per_load:.1f} sectors a load: use wide.load4"


def test_optimized_off_the_grid_reads_twice():
    """Rows off the 16-byte grid are not held: optimized hands them to the online kernel (two reads)."""
    reads, _ = _read_passes("optimized", (1, 4097))
    assert 1.95 <= reads <= 2.05, f"optimized(1, 4097): x read {reads:.2f} times; expected the online kernel's 2"


def test_online_merges_in_registers():
    """The block's (m, s) pairs travel by shuffle (shfl.sync), the loads are several in flight, and the
    running pair stays in registers (no stack frame)."""
    rep = g.report("online")
    assert rep.count("shfl.sync") > 0, "online: no shfl.sync: merge the warp's (m, s) pairs with shuffles"
    assert not rep.uses_local_memory, f"online: {rep.stack_bytes} bytes of stack (local memory)"
    assert rep.loads_in_flight >= 2, (
        f"online: at most {rep.loads_in_flight} global load(s) back to back in the PTX: issue several "
        "independent loads a trip before the arithmetic")


@pytest.mark.parametrize("label", ("optimized", "optimized.32768", "optimized.edge"))
def test_optimized_holds_the_row_in_registers(label):
    """The held row is registers (no stack frame: only constant indices into it), the loads of a row that
    fills its class all issued before the arithmetic; the warps' pairs meet in shared memory behind a
    barrier. (optimized.32768 and .edge guard each group: day 57's block kernel's form.)"""
    rep = g.report(label)
    assert not rep.uses_local_memory, (
        f"{label}: {rep.stack_bytes} bytes of stack (local memory): index the held row only with constants")
    assert rep.count("shfl.sync") > 0, f"{label}: no shfl.sync: merge the warp's (m, s) pairs with shuffles"
    assert rep.count("st.shared") > 0 and rep.count("bar.sync") > 0, (
        f"{label}: no st.shared / bar.sync: the warps' pairs meet in shared memory behind a barrier")
    if label == "optimized":  # a row filling its class (4096): no guard, so no branch between the loads
        assert rep.loads_in_flight >= 8, (
            f"{label}: {rep.loads_in_flight} loads back to back; the thread's 16-byte loads should all be "
            "issued before the arithmetic (no branch around them)")


@pytest.mark.gpu
@pytest.mark.parametrize("n", ((64, 131072), (1024, 32768), (8192, 4096), (1000, 32764), (333, 8196)),
                         ids=["128k", "32k", "4k", "32k-4", "8k+4"])
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_large(version, n):
    """A 128k vocabulary row, a 32k one, attention-sized rows."""
    g.run_and_compare(version, n)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", sol.HARD_KINDS)
def test_hard_inputs_long_rows(kind):
    """The hard inputs at 128k a row on the GPU (float32 exp and sums as the hardware does them)."""
    (x,) = sol.hard_inputs(kind, (8, 131072))
    got = _run("optimized", x)
    assert not np.isnan(got).any(), f"optimized({kind}): NaN in the output"
    checking.assert_matches(got, sol.reference(x), rtol=sol.RTOL, name=f"optimized({kind}, 128k)")


@pytest.mark.gpu
def test_library_row():
    """torch.softmax, the row the targets compare with (skipped where torch is not installed)."""
    pytest.importorskip("torch")
    g.run_and_compare("library", (1024, 32768))
