"""Day 03 grader: SAXPY steps with a round trip per step against device-resident data."""

import numpy as np
import pytest

from course import cuda, launch
from course.checking import assert_matches
from course.grading import Grader

g = Grader(3)

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "length-mismatch": lambda xs: (xs[0], xs[1][:-1]) + xs[2:],
        "zero-steps": lambda xs: xs[:3] + (0,),
        "a-is-an-array": lambda xs: xs[:2] + (np.ones(3, np.float32), xs[3]),
    }
)


class TransferCounter:
    """Counts host->device and device->host copies by wrapping numba's entry points for them."""

    def __init__(self, monkeypatch):
        self.up = self.down = 0
        self._inside = False  # on a GPU, cuda.to_device calls copy_to_device: count that copy once
        devarray_type = type(cuda.device_array(1, np.float32))
        real_to_device, real_to_host = cuda.to_device, devarray_type.copy_to_host
        real_copy_to_device = devarray_type.copy_to_device

        def to_device(obj, *args, **kwargs):
            self.up += isinstance(obj, np.ndarray)
            self._inside = True
            try:
                return real_to_device(obj, *args, **kwargs)
            finally:
                self._inside = False

        def copy_to_device(dev, ary, *args, **kwargs):
            self.up += isinstance(ary, np.ndarray) and not self._inside
            return real_copy_to_device(dev, ary, *args, **kwargs)

        def copy_to_host(dev, *args, **kwargs):
            self.down += 1
            return real_to_host(dev, *args, **kwargs)

        monkeypatch.setattr(cuda, "to_device", to_device)
        monkeypatch.setattr(devarray_type, "copy_to_device", copy_to_device)
        monkeypatch.setattr(devarray_type, "copy_to_host", copy_to_host)


def _count(version, monkeypatch, steps=5, n=300):
    g.require_implemented(version)
    x, y, a, _ = g.solution.make_inputs(n, seed=3)
    counter = TransferCounter(monkeypatch)
    with launch.no_poison():  # in the simulator, poisoning an output is itself a host->device copy
        got = getattr(g.target, version)(x, y, a, steps)
    assert isinstance(got, np.ndarray), f"{version}: NumPy inputs must give a NumPy result"
    return counter, got, g.solution.reference(x, y, a, steps)


def test_optimized_uploads_once_and_downloads_once(monkeypatch):
    """Five steps, still one copy of each input up and one copy of the result down."""
    counter, got, expected = _count("optimized", monkeypatch)
    assert (counter.up, counter.down) == (2, 1), (
        f"optimized: {counter.up} host->device and {counter.down} device->host copies for 5 steps; "
        "expected x and y up once (2) and the result down once (1)")
    assert_matches(got, expected, name="optimized(steps=5)")


def test_naive_pays_a_round_trip_per_step(monkeypatch):
    """The contrast: the naive version copies x and y up and y down at every step."""
    counter, got, expected = _count("naive", monkeypatch)
    assert (counter.up, counter.down) == (10, 5), (counter.up, counter.down)
    assert_matches(got, expected, name="naive(steps=5)")


def test_optimized_leaves_device_inputs_alone():
    """Device arrays in, device array out, and the caller's y unchanged (repeated calls must agree)."""
    g.require_implemented("optimized")
    x, y, a, steps = g.solution.make_inputs(1021, seed=5)
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    first = g.target.optimized(d_x, d_y, a, steps)
    assert not isinstance(first, np.ndarray), "device inputs must give a device result"
    np.testing.assert_array_equal(d_y.copy_to_host(), y, err_msg="optimized wrote into its input y")
    assert_matches(first, g.solution.reference(x, y, a, steps), name="optimized(device inputs)")


def test_kernel_stays_in_registers():
    rep = g.report("optimized")
    assert not rep.uses_local_memory, f"{rep.stack_bytes} bytes of stack (local memory)"
    assert rep.count("ld.shared") == rep.count("st.shared") == 0


@pytest.mark.gpu
def test_optimized_large():
    """2^24 + 3 elements: several times the L2, and not a multiple of the unrolled stride."""
    g.run_and_compare("optimized", (1 << 24) + 3)
