"""numba-cuda's own simulator tests, run with the course's simulator additions: a pytest plugin.

    python -m pytest -p course.peer --pyargs numba.cuda.tests.cudapy ...     (make test-peer)

numba-cuda ships its tests in its wheel; most of them run under its CUDA simulator. Run as a peer
suite they check that the course's additions (course.simulator: its scheduler, warp intrinsics and
teaching checks) break nothing numba-cuda itself relies on. This plugin

- chooses the simulator and installs the additions before numba-cuda's tests import numba;
- supplies the one fixture their test classes request from numba-cuda's repository conftest,
  which the wheel does not ship (``initialize_from_pytest_config``);
- runs the warp-operation and ``syncwarp`` tests that numba-cuda skips under its simulator only
  because the stock simulator lacks those intrinsics: with the course's they must pass;
- skips the few tests that cannot run here, each with its reason (NOT_HERE below), and marks as
  expected failures the ones that run but answer differently (EXPECTED_FAILURES, strict: one that
  starts to pass fails the run, so the list stays true).
"""

from __future__ import annotations

import os

os.environ.setdefault("COURSE_DEVICE", "sim")

import pytest  # noqa: E402

import course  # noqa: E402,F401  (the choice and the simulator's additions, before numba's tests load)
from numba.cuda import testing as _testing  # noqa: E402

# Skips numba-cuda makes under its simulator only for want of what the course's simulator adds.
UNSKIPPED_REASONS = (
    "Warp Operations are not yet implemented on cudasim",
    "syncwarp not implemented on cudasim",
)

# "path::Class::test" (path relative to numba/cuda/tests/) -> why it cannot run in any simulator (or,
# last, why it tests a limit of the stock simulator that the course's lifts).
_LLVM = "inspects the LLVM IR of the compiled kernel: the simulator compiles nothing"
_TYPING = "expects numba's compile-time TypingError: the simulator runs Python and types nothing"
_PRINT = ("runs its kernel in a subprocess under numba's stock simulator, whose OS thread per CUDA thread "
          "interleaves the printed lines at random (the course's scheduler is not in that process)")
NOT_HERE: dict[str, str] = {
    "cudapy/test_warp_ops.py::TestCudaWarpOperations::test_shfl_sync_const_mode_val": _LLVM,
    "cudapy/test_warp_ops.py::TestCudaWarpOperations::test_shfl_sync_const_mode_val_sm100": _LLVM,
    "cudapy/test_warp_ops.py::TestCudaWarpOperations::test_vote_sync_const_mode_val": _LLVM,
    "cudapy/test_warp_ops.py::TestCudaWarpOperations::test_vote_sync_const_mode_val_sm100": _LLVM,
    "cudapy/test_warp_ops.py::TestCudaWarpOperations::test_vote_sync_type_validation": _TYPING,
    # the three whose kernels print from several threads (cuhello[2, 3], printstring[1, 3],
    # printdim3[1, (2, 2, 2)]); the one-thread print tests run
    "cudapy/test_print.py::TestPrint::test_cuhello": _PRINT,
    "cudapy/test_print.py::TestPrint::test_string": _PRINT,
    "cudapy/test_print.py::TestPrint::test_dim3": _PRINT,
    # a limit of the stock simulator that the course's lifts (course.wide's float4 accesses need it)
    "cudapy/test_array_alignment.py::TestCudasimUnsupportedAlignment::test_shared_unsupported": (
        "expects the stock simulator to refuse cuda.shared.array(..., alignment=...); the course's accepts "
        "it and checks 16-byte accesses against it (course.simulator.MisalignedAccess)"),
}

# the same keys -> why the course's simulator gives another answer than the GPU (none today).
EXPECTED_FAILURES: dict[str, str] = {}

_skip_on_cudasim = _testing.skip_on_cudasim


def _skip_unless_the_course_implements_it(reason):
    if reason in UNSKIPPED_REASONS:
        return lambda f: f
    return _skip_on_cudasim(reason)


_testing.skip_on_cudasim = _skip_unless_the_course_implements_it


@pytest.fixture(scope="class")
def initialize_from_pytest_config(request):
    """numba-cuda's repository conftest sets test-run options here; the simulator needs none."""
    yield


def _key(item) -> str:
    return str(item.path).split("numba/cuda/tests/", 1)[-1] + "::" + item.nodeid.split("::", 1)[-1]


def pytest_collection_modifyitems(config, items):
    for item in items:
        key = _key(item)
        if key in NOT_HERE:
            item.add_marker(pytest.mark.skip(reason=NOT_HERE[key]))
        elif key in EXPECTED_FAILURES:
            item.add_marker(pytest.mark.xfail(reason=EXPECTED_FAILURES[key], strict=True))
