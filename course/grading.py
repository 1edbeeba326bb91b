"""Reusable graders: the tests every day runs, so each tests/test_dayNN_*.py states only what is special.

    from course.grading import Grader
    g = Grader(1)
    test_matches_reference = g.matches_reference()      # every version x TEST_SIZES, fresh inputs
    test_rejects_bad_inputs = g.rejects_bad_inputs()     # wrong dtype / strided view per input

Inputs are fresh each run (a random seed, printed on failure; COURSE_SEED=N fixes it). Every graded
test first checks that the version is implemented: a stub still raising NotImplementedError fails
with its hint, so the untouched exercise fails all of its day's tests, not only the numeric ones.
"""

from __future__ import annotations

import os
import zlib

import numpy as np
import pytest

from course import checking, compiler, days
from course.days import stub_hint  # noqa: F401  (graders import it from here)

_SESSION_SEED = int(os.environ.get("COURSE_SEED", np.random.SeedSequence().entropy % (2**31)))


def seed_for(*parts) -> int:
    """A seed that differs per test case and per run, reproducible with COURSE_SEED."""
    return (_SESSION_SEED + zlib.crc32(repr(parts).encode())) % (2**31)


class Grader:
    def __init__(self, day: int | str):
        self.info = days.find(day)
        self.solution = days.load_solution(day)
        self.target = days.load_target(day)
        self.versions = days.versions(self.solution)

    # --- building blocks -------------------------------------------------------------------------

    def kernels_of(self, version: str) -> dict:
        kernels = getattr(self.target, "KERNELS", {})
        return {k: v for k, v in kernels.items() if k == version or k.startswith(version + ".")}

    def require_implemented(self, *versions: str) -> None:
        """Fail (not skip) with the stub's hint while a version (every version by default) or another
        function the learner writes (``g.require_implemented("occupancy")``) is still unwritten."""
        for version in versions or self.versions:
            if getattr(self.target, version, None) is None:
                pytest.fail(f"{self.target.__name__} has no function {version!r}", pytrace=False)
            missing = days.unwritten(self.target, version)
            if missing:
                pytest.fail(missing, pytrace=False)

    def nvcc(self, source_function: str, *args) -> dict:
        """The learner's CUDA C built with nvcc (course.compiler.nvcc_build: ptxas's report and the PTX):
        fails while ``source_function`` is unwritten or the source does not build, skips where the CUDA
        toolkit is not installed."""
        self.require_implemented(source_function)
        if compiler.NVCC is None:
            pytest.skip("nvcc is not installed here: CUDA C is compiled with nvcc (the CUDA toolkit)")
        try:
            return compiler.nvcc_build(getattr(self.target, source_function)(*args))
        except compiler.NvccError as exc:
            pytest.fail(f"{source_function}(): {exc}", pytrace=False)

    def inputs(self, n, *parts):
        seed = seed_for(self.info.slug, n, *parts)
        return self.solution.make_inputs(n, seed=seed), seed

    def run_and_compare(self, version: str, n, *, rtol=None, floor=None, parts=()) -> None:
        """``version`` at size ``n`` against the reference, at the day's RTOL and ERROR_FLOOR unless
        ``rtol`` / ``floor`` say otherwise (course.checking.compare: floor is a share of the output's
        scale below which an element's error is measured against that share, not its own size)."""
        self.require_implemented(version)
        inputs, seed = self.inputs(n, version, *parts)
        expected = self.solution.reference(*inputs)
        got = getattr(self.target, version)(*inputs)
        rtol = rtol if rtol is not None else getattr(self.solution, "RTOL", None)
        floor = floor if floor is not None else getattr(self.solution, "ERROR_FLOOR", None)
        report = checking.compare(got, expected, rtol=rtol, floor=floor,
                                  name=f"{version}(n={n})", min_scale=getattr(self.solution, "MIN_SCALE", 0.0))
        if not report.ok:
            raise checking.MismatchError(f"{report.text}\n  (inputs: make_inputs({n!r}, seed={seed}))")

    def traffic(self, version: str, n=None):
        """The memory traffic of the target's ``version`` run once in the simulator at size ``n`` (the
        largest test size by default), summed over its kernels (course.traffic). Simulator only: on a
        GPU the test is skipped (Nsight Compute counts the same there)."""
        from course import ON_GPU, traffic

        if ON_GPU:
            pytest.skip("memory traffic is counted in the simulator; on a GPU, Nsight Compute counts it")
        self.require_implemented(version)
        n = n if n is not None else self.solution.TEST_SIZES[-1]
        (measured,) = traffic.measure_day(self.target, self.solution, n, versions=[version])
        return measured.total

    def report(self, label: str) -> compiler.KernelReport:
        """The compiler's report on the target's kernel ``label`` (see course.compiler)."""
        version = label.split(".")[0]
        self.require_implemented(version)
        return compiler.report(self.target, label)

    # --- whole tests -------------------------------------------------------------------------------

    def matches_reference(self, sizes=None, *, rtol=None, floor=None, versions=None):
        sizes = tuple(sizes if sizes is not None else self.solution.TEST_SIZES)

        @pytest.mark.parametrize("n", sizes, ids=[str(s) for s in sizes])
        @pytest.mark.parametrize("version", versions or self.versions)
        def test(version, n):
            self.run_and_compare(version, n, rtol=rtol, floor=floor)

        return test

    def rejects_bad_inputs(self, n=None, *, extra_cases=None, versions=None):
        """Each input with the wrong dtype, and as a strided view: ValueError before any launch.

        ``extra_cases`` maps a case name to a function (inputs tuple -> bad inputs tuple).
        """
        n = n if n is not None else self.solution.TEST_SIZES[-1]
        inputs, _ = self.inputs(n, "bad")
        cases = {}
        for i, a in enumerate(inputs):
            if not isinstance(a, np.ndarray):
                continue
            wrong = np.float64 if a.dtype != np.float64 else np.float32
            cases[f"input{i}-dtype"] = (lambda xs, i=i, w=wrong: xs[:i] + (xs[i].astype(w),) + xs[i + 1:])
            cases[f"input{i}-strided"] = (
                lambda xs, i=i: xs[:i] + (np.repeat(xs[i], 2, axis=0)[::2],) + xs[i + 1:])
        cases.update(extra_cases or {})

        @pytest.mark.parametrize("case", list(cases))
        @pytest.mark.parametrize("version", versions or self.versions)
        def test(version, case):
            self.require_implemented(version)
            bad = cases[case](tuple(inputs))
            with pytest.raises(ValueError):
                getattr(self.target, version)(*bad)

        return test
