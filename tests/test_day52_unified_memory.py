"""Day 52 grader: one SAXPY on managed memory, first touched by the GPU vs advised and prefetched.

The simulator has no managed memory: there NumPy arrays stand in for managed ones and the runtime's
advice and prefetch calls are recorded, not made, so the host functions and the calls are graded
everywhere; the gpu-marked tests run the same versions on real managed memory.
"""

import ctypes

import numpy as np
import pytest

from course import ON_GPU, cuda
from course.checking import assert_matches
from course.grading import Grader

g = Grader(52)
sol = g.solution
OWN = ("naive", "prefetched")  # what the learner writes; `device` (explicit copies) is given


@pytest.mark.parametrize("n", sol.TEST_SIZES, ids=[str(n) for n in sol.TEST_SIZES])
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_matches_reference(version, n):
    """Every version at every test size; `device` is the baseline row, graded once the day's two are written."""
    g.require_implemented(*OWN)
    g.run_and_compare(version, n)


test_rejects_bad_inputs = g.rejects_bad_inputs(
    versions=OWN,
    extra_cases={
        "length-mismatch": lambda xs: (xs[0], xs[1][:-1], xs[2]),
        "a-is-an-array": lambda xs: (xs[0], xs[1], np.ones(3, np.float32)),
        "device-arrays": lambda xs: (cuda.to_device(xs[0]), cuda.to_device(xs[1]), xs[2]),
    },
)


class RecordingRuntime(sol.SimRuntime):
    """The runtime's unified-memory calls recorded with what the range held at the moment of the call
    (the GPU finished first): moves nothing, so on a GPU the pages go by faults, still correctly."""

    def __init__(self, n):
        super().__init__()
        self.n = n

    def _held(self, ptr, count):
        cuda.synchronize()
        k = min(count, 4 * self.n) // 4  # never read past a float32 array of n
        return np.ctypeslib.as_array((ctypes.c_float * k).from_address(ptr)).copy() if k else np.empty(0, np.float32)

    def memAdvise(self, ptr, count, advice, device):
        self.calls.append(("advise", ptr, count, advice, device, self._held(ptr, count)))

    def memPrefetchAsync(self, ptr, count, dst, stream):
        self.calls.append(("prefetch", ptr, count, dst, stream, self._held(ptr, count)))


def _recorded(version, monkeypatch, n=1021):
    g.require_implemented(*OWN)
    x, y, a = sol.make_inputs(n, seed=7)
    rec = RecordingRuntime(n)
    monkeypatch.setattr(g.target, "runtime", lambda: rec)
    got = getattr(g.target, version)(x, y, a)
    assert type(got) is np.ndarray, f"{version}: expected a plain NumPy result, got {type(got).__name__}"
    assert_matches(got, sol.reference(x, y, a), name=f"{version}(n={n})")
    return rec.calls, x, y, sol.reference(x, y, a)


def test_prefetched_advises_the_read_only_input(monkeypatch):
    """Read-mostly advice on x, over all of its bytes, and on nothing else: y is written, and written
    read-mostly pages collapse to one copy at every write."""
    calls, x, y, _ = _recorded("prefetched", monkeypatch)
    read_mostly = sol.SimRuntime.cudaMemAdviseSetReadMostly
    advice = [c for c in calls if c[0] == "advise" and c[3] == read_mostly]
    assert len(advice) == 1, (
        f"prefetched: {len(advice)} read-mostly cudaMemAdvise calls (advice {read_mostly}); expected one, on x")
    _, _, count, _, _, held = advice[0]
    assert count == x.nbytes, f"prefetched: advised {count} bytes of x; its size is {x.nbytes} BYTES (x.nbytes)"
    assert np.array_equal(held, x), "prefetched: the range advised read-mostly does not hold x (advise x, not y)"


def test_prefetched_moves_both_inputs_before_the_kernel(monkeypatch):
    """x and y prefetched to the GPU, every byte, after the host wrote them and before the kernel ran
    (the ranges still hold the inputs when the prefetch is issued)."""
    calls, x, y, _ = _recorded("prefetched", monkeypatch)
    to_gpu = [c for c in calls if c[0] == "prefetch" and c[3] != sol.SimRuntime.cudaCpuDeviceId]
    counts = sorted(c[2] for c in to_gpu)
    assert counts == [x.nbytes, y.nbytes], (
        f"prefetched: prefetches to the GPU of {counts} bytes; expected x and y whole, {x.nbytes} bytes each "
        "(counts are in bytes: m.nbytes, not m.size)")
    held = [c[5] for c in to_gpu]
    assert any(np.array_equal(h, x) for h in held) and any(np.array_equal(h, y) for h in held), (
        "prefetched: the ranges prefetched to the GPU did not hold x and y: prefetch the managed copies "
        "after the host filled them and before the kernel")


def test_prefetched_brings_the_result_back(monkeypatch):
    """One prefetch to the host (cudaCpuDeviceId) of all of y's bytes, issued after the kernel."""
    calls, x, _, expected = _recorded("prefetched", monkeypatch)
    back = [c for c in calls if c[0] == "prefetch" and c[3] == sol.SimRuntime.cudaCpuDeviceId]
    assert len(back) == 1 and back[0][2] == x.nbytes, (
        f"prefetched: prefetches to the host {[c[2] for c in back]}; expected one of y's {x.nbytes} bytes")
    assert_matches(back[0][5], expected, name="the range prefetched to the host (must follow the kernel)")


def test_naive_leaves_everything_to_faults(monkeypatch):
    """The contrast: first touch makes no advice and no prefetch; the driver learns from the faults."""
    calls, *_ = _recorded("naive", monkeypatch)
    assert calls == [], f"naive: {len(calls)} advice/prefetch calls; first touch makes none"


def test_managed_versions_leave_inputs_alone():
    """The managed copies are the versions' own: the caller's x and y come back unchanged."""
    g.require_implemented(*OWN)
    x, y, a = sol.make_inputs(257, seed=11)
    x0, y0 = x.copy(), y.copy()
    for version in OWN:
        getattr(g.target, version)(x, y, a)
        np.testing.assert_array_equal(y, y0, err_msg=f"{version} wrote into its input y")
        np.testing.assert_array_equal(x, x0, err_msg=f"{version} wrote into its input x")


def test_device_baseline_keeps_device_inputs():
    """The baseline: device arrays in, a device array out, the caller's y unchanged."""
    g.require_implemented(*OWN)
    x, y, a = sol.make_inputs(1021, seed=5)
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    got = g.target.device(d_x, d_y, a)
    assert not isinstance(got, np.ndarray), "device: device inputs must give a device result"
    np.testing.assert_array_equal(d_y.copy_to_host(), y, err_msg="device wrote into its input y")
    assert_matches(got, sol.reference(x, y, a), name="device(device inputs)")


def test_one_kernel_in_registers():
    """Every version launches the same kernel (where the pages are is the day's subject), with no local memory."""
    g.require_implemented(*OWN)
    kernels = {g.kernels_of(v)[v][0] for v in sol.VERSIONS}
    assert len(kernels) == 1, "the three versions should launch one and the same SAXPY kernel"
    rep = g.report("prefetched")
    assert not rep.uses_local_memory, f"{rep.stack_bytes} bytes of stack (local memory)"


def test_kernel_traffic_is_the_same_in_every_version():
    """Managed or not, the kernel asks for the same sectors (12 bytes an element, coalesced): page
    migration happens below these counts, over PCIe, and is what the GPU timings show."""
    g.require_implemented(*OWN)
    totals = {v: g.traffic(v) for v in sol.VERSIONS}
    x, y, a = sol.make_inputs(sol.TEST_SIZES[-1])
    minimum = sol.traffic(x, y, a)[0]
    for v, t in totals.items():
        assert t.sectors_per_load <= 4.1, f"{v}: {t.sectors_per_load:.1f} sectors per load request"
        assert t.global_bytes <= 1.05 * minimum, f"{v}: {t.global_bytes} bytes of sectors, minimum {minimum}"
    assert len({t.global_bytes for t in totals.values()}) == 1, {v: t.global_bytes for v, t in totals.items()}


def test_lesson_measurements_need_a_gpu():
    """Off a GPU the lesson's measurements say so plainly instead of timing the simulator."""
    g.require_implemented(*OWN)
    if ON_GPU:
        pytest.skip("on a GPU the measurements run (test_lesson_measurements_on_gpu)")
    for fn in (g.target.first_touch_vs_prefetch, g.target.host_touch_cost):
        with pytest.raises(RuntimeError, match="GPU"):
            fn()


@pytest.mark.gpu
def test_managed_versions_large():
    """Real managed memory, 2^22 + 3 elements (32 MB of x and y): not a multiple of a page or the stride."""
    for version in OWN:
        g.run_and_compare(version, (1 << 22) + 3)


@pytest.mark.gpu
def test_prefetch_calls_name_managed_memory(monkeypatch):
    """On a GPU: every range advised or prefetched is managed memory (cudaPointerGetAttributes), and
    the real calls, made, give the right result."""
    g.require_implemented(*OWN)
    rt = sol.runtime()  # CuPy's runtime calls (a prefetch to the host made to work on CUDA 13 too)
    seen = []

    class Checked:
        def __getattr__(self, name):
            return getattr(rt, name)

        def _managed(self, ptr):
            seen.append(rt.pointerGetAttributes(ptr).type == rt.memoryTypeManaged)

        def memAdvise(self, ptr, count, advice, device):
            self._managed(ptr)
            rt.memAdvise(ptr, count, advice, device)

        def memPrefetchAsync(self, ptr, count, dst, stream):
            self._managed(ptr)
            rt.memPrefetchAsync(ptr, count, dst, stream)

    monkeypatch.setattr(g.target, "runtime", lambda: Checked())
    n = (1 << 20) + 5
    x, y, a = sol.make_inputs(n, seed=3)
    assert_matches(g.target.prefetched(x, y, a), sol.reference(x, y, a), name=f"prefetched(n={n})")
    assert len(seen) == 4 and all(seen), f"prefetched: managed ranges {seen}; expected 4 calls, all on managed memory"


@pytest.mark.gpu
def test_lesson_measurements_on_gpu():
    """The lesson's two measurements at a small size: they check their own results; the times are positive."""
    g.require_implemented(*OWN)
    (row,) = g.target.first_touch_vs_prefetch((1 / 16,))
    assert all(row[k] > 0 for k in ("first_touch_ms", "prefetched_ms", "resident_kernel_ms", "explicit_copy_ms"))
    touch = g.target.host_touch_cost(1 / 16, strides=(4096, 1 << 20))
    assert len(touch["rows"]) == 3 and all(r["kernel_ms"] > 0 for r in touch["rows"])
