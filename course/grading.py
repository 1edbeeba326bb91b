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

import ast
import inspect
import os
import textwrap
import zlib

import numpy as np
import pytest

from course import checking, compiler, days

_SESSION_SEED = int(os.environ.get("COURSE_SEED", np.random.SeedSequence().entropy % (2**31)))


def seed_for(*parts) -> int:
    """A seed that differs per test case and per run, reproducible with COURSE_SEED."""
    return (_SESSION_SEED + zlib.crc32(repr(parts).encode())) % (2**31)


def stub_hint(func) -> str | None:
    """The NotImplementedError hint if ``func`` (a kernel or host function) is still a stub, or is
    built by a factory around one: a device function in its closure (day 07 hands a stub tap reader
    to day 06's window_kernel) is checked the same way."""
    py_func = getattr(func, "py_func", func)
    try:
        source = inspect.getsource(py_func)
    except (OSError, TypeError):
        return None
    if "raise NotImplementedError" not in source:
        for cell in getattr(py_func, "__closure__", None) or ():
            inner = cell.cell_contents
            if inner is not func and hasattr(inner, "py_func"):
                hint = stub_hint(inner)
                if hint:
                    return hint
        return None
    return _raised_hint(source)


def _raised_hint(source: str) -> str | None:
    """The message of the first ``raise NotImplementedError("...")`` in a function's source, whole
    (a hint may hold parentheses and run over several string pieces)."""
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return "not written yet"
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) \
                and getattr(node.exc.func, "id", None) == "NotImplementedError":
            args = node.exc.args
            if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
                return " ".join(args[0].value.split())
            return "not written yet"
    return None


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
        """Fail (not skip) with the stub's hint while a version is still unwritten."""
        for version in versions or self.versions:
            fn = getattr(self.target, version, None)
            if fn is None:
                pytest.fail(f"{self.target.__name__} has no function {version!r}", pytrace=False)
            # the host function and each of its kernels (a KERNELS label may equal the version's name:
            # a list, not a dict, so a stubbed host function around a given kernel is still caught)
            for label, kernel in [(version, fn), *((k, v[0]) for k, v in self.kernels_of(version).items())]:
                hint = stub_hint(kernel)
                if hint:
                    pytest.fail(f"{label} is not written yet: {hint}", pytrace=False)

    def inputs(self, n, *parts):
        seed = seed_for(self.info.slug, n, *parts)
        return self.solution.make_inputs(n, seed=seed), seed

    def run_and_compare(self, version: str, n, *, rtol=None, parts=()) -> None:
        self.require_implemented(version)
        inputs, seed = self.inputs(n, version, *parts)
        expected = self.solution.reference(*inputs)
        got = getattr(self.target, version)(*inputs)
        rtol = rtol if rtol is not None else getattr(self.solution, "RTOL", None)
        report = checking.compare(got, expected, rtol=rtol, floor=getattr(self.solution, "ERROR_FLOOR", None),
                                  name=f"{version}(n={n})")
        if not report.ok:
            raise checking.MismatchError(f"{report.text}\n  (inputs: make_inputs({n!r}, seed={seed}))")

    def report(self, label: str) -> compiler.KernelReport:
        """The compiler's report on the target's kernel ``label`` (see course.compiler)."""
        version = label.split(".")[0]
        self.require_implemented(version)
        return compiler.report(self.target, label)

    # --- whole tests -------------------------------------------------------------------------------

    def matches_reference(self, sizes=None, *, rtol=None, versions=None):
        sizes = tuple(sizes if sizes is not None else self.solution.TEST_SIZES)

        @pytest.mark.parametrize("n", sizes, ids=[str(s) for s in sizes])
        @pytest.mark.parametrize("version", versions or self.versions)
        def test(version, n):
            self.run_and_compare(version, n, rtol=rtol)

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
