"""The lab bench itself: device choice, checking, input validation, day loading, the CLI's errors."""

import inspect
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import course
from course import checking, cuda, days, launch
from course.device import choose


def test_device_choice_is_made_and_described():
    assert course.DEVICE.kind in ("gpu", "sim")
    line = course.DEVICE.describe()
    assert ("cc " in line) if course.ON_GPU else line.startswith("no CUDA GPU: Numba CUDA simulator")


def test_course_device_rejects_unknown_values(monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "tpu")
    with pytest.raises(SystemExit, match="COURSE_DEVICE"):
        choose()


class TestChecking:
    ref = np.linspace(1, 2, 10, dtype=np.float32)

    def test_exact_match_passes(self):
        assert checking.compare(self.ref.copy(), self.ref).ok

    def test_nan_never_passes(self):
        got = self.ref.copy()
        got[3] = np.nan
        report = checking.compare(got, self.ref)
        assert not report.ok and "NaN" in report.text and "(3,)" in report.text

    def test_all_zero_never_passes(self):
        report = checking.compare(np.zeros_like(self.ref), self.ref)
        assert not report.ok and "zero" in report.text

    def test_small_float32_error_passes_and_large_fails(self):
        assert checking.compare(self.ref * np.float32(1 + 1e-6), self.ref).ok
        got = self.ref.copy()
        got[7] *= 1.01
        report = checking.compare(got, self.ref)
        assert not report.ok and "at 7: expected" in report.text

    def test_near_zero_elements_get_rounding_room_of_the_outputs_scale(self):
        # A near-cancelling element (a filter over random pixels) carries the rounding of the large terms:
        # 8 units in the last place of the scale (1.0) pass; an error of 1e-4 of the scale does not.
        ref = np.array([1.0, -0.75, 3e-4], dtype=np.float32)
        got = ref.copy()
        got[2] += np.float32(8 * 2.0 ** -23)
        assert checking.compare(got, ref).ok
        got[2] = ref[2] + np.float32(1e-4)
        assert not checking.compare(got, ref).ok

    def test_shape_and_dtype_must_match(self):
        assert not checking.compare(self.ref[:-1], self.ref).ok
        assert not checking.compare(self.ref.astype(np.float64), self.ref).ok

    def test_a_non_finite_reference_is_matched_exactly(self):
        ref = np.array([1.0, np.inf, -np.inf, np.nan, 2.0], dtype=np.float32)
        assert checking.compare(ref.copy(), ref).ok
        for i, wrong in ((1, 3.0e38), (2, np.inf), (3, 0.0)):  # a number for inf, the other inf, a number for NaN
            got = ref.copy()
            got[i] = wrong
            report = checking.compare(got, ref)
            assert not report.ok and f"at {i}:" in report.text

    def test_margin_log_records_each_toleranced_check(self, tmp_path, monkeypatch):
        log = tmp_path / "m.tsv"
        monkeypatch.setenv(checking.MARGIN_LOG, str(log))
        got = self.ref.copy()
        got[4] *= np.float32(1 + 5e-5)
        checking.compare(got, self.ref, name="half")
        checking.compare(np.arange(3), np.arange(3))  # exact (integers): no tolerance, nothing logged
        lines = log.read_text().splitlines()
        assert len(lines) == 1
        test, name, err, rtol = lines[0].split("\t")
        assert "test_margin_log_records" in test and name == "half"
        assert float(rtol) == checking.RTOL["float32"] and 0.4 < float(err) / float(rtol) < 0.6

        monkeypatch.syspath_prepend(str(days.ROOT / "tools"))
        import margins
        worst = margins.load([log])
        assert [(round(v[0], 1), v[1], v[2]) for v in worst.values()] == [(0.5, 1, "half")]

    def test_integers_compare_exactly(self):
        ref = np.arange(5, dtype=np.int32)
        got = ref.copy()
        got[2] += 1
        assert checking.compare(ref.copy(), ref).ok and not checking.compare(got, ref).ok

    def test_assert_matches_raises_a_readable_error(self):
        with pytest.raises(checking.MismatchError, match="elements differ"):
            checking.assert_matches(self.ref + 1, self.ref)


class TestLaunch:
    def test_check_array_messages_say_what_was_expected(self):
        a = np.zeros(4, dtype=np.float64)
        with pytest.raises(ValueError, match="expected dtype float32, got NumPy array of shape \\(4,\\)"):
            launch.check_array("a", a, dtype=np.float32)
        with pytest.raises(ValueError, match="expected a 2-D array"):
            launch.check_array("a", a, ndim=2)
        with pytest.raises(ValueError, match="expected shape \\(5\\)"):
            launch.check_array("a", a, shape=(5,))
        with pytest.raises(ValueError, match="C-contiguous"):
            launch.check_array("a", np.zeros(8)[::2])
        with pytest.raises(ValueError, match="NumPy or device array"):
            launch.check_array("a", [1.0, 2.0])

    def test_outputs_are_poisoned(self):
        out = launch.empty((7,), np.float32)
        assert np.isnan(out.copy_to_host()).all()
        ints = launch.empty((3,), np.int32).copy_to_host()
        assert (ints == launch.poison_value(np.int32)).all()

    def test_scratch_arrays(self):
        """launch.scratch: CuPy's pool on a GPU (read in place by prepared launches), a poisoned device
        array in the simulator: its contents are never assumed."""
        from course import ON_GPU

        s = launch.scratch((4, 3), np.uint64)
        assert s.shape == (4, 3) and s.dtype == np.uint64
        if ON_GPU:
            assert hasattr(s, "data") and hasattr(s.data, "ptr"), type(s)
        else:
            assert (s.copy_to_host() == launch.poison_value(np.uint64)).all()

    def test_zero_clears_in_place(self):
        """launch.zero: poisoned scratch (CuPy's on a GPU) and a Numba device array come back all zero,
        the same objects; an empty array is left alone; a non-contiguous view is refused."""
        from course import checking

        s = launch.scratch((5,), np.uint64)
        c = launch.empty((2,), np.int32)
        e = launch.scratch((0,), np.float32)
        launch.zero(s, c, e)
        assert (checking.to_host(s) == 0).all() and (checking.to_host(c) == 0).all()
        (strided,) = launch.to_device(np.ones((4, 4), np.float32))
        with pytest.raises(ValueError, match="contiguous"):
            launch.zero(strided[:, 1])

    def test_pooled_outputs(self):
        """launch.pooled_empty: a poisoned output (CuPy's pool on a GPU), unpoisoned under no_poison;
        launch.result copies it, or a slice of it, to NumPy for a NumPy caller and hands it back as it
        is to a device caller."""
        from course import ON_GPU, checking

        out = launch.pooled_empty((6,), np.float32)
        assert out.shape == (6,) and out.dtype == np.float32
        assert np.isnan(checking.to_host(out)).all()
        ints = launch.pooled_empty((3,), np.int32)
        assert (checking.to_host(ints) == launch.poison_value(np.int32)).all()
        if ON_GPU:
            assert hasattr(out, "data") and hasattr(out.data, "ptr"), type(out)
        host = launch.result(out[:4], np.zeros(2, np.float32))
        assert isinstance(host, np.ndarray) and host.shape == (4,) and np.isnan(host).all()
        (dev,) = launch.to_device(np.zeros(2, np.float32))
        assert launch.result(out, dev) is out

    def test_pinned_host_arrays(self):
        """launch.pinned_empty / pinned_copy: NumPy arrays (poisoned while poisoning is on), locked on a
        GPU; is_pinned tells them from pageable memory, and is False for everything in the simulator."""
        from course import ON_GPU

        p = launch.pinned_empty((5, 2), np.float32)
        assert isinstance(p, np.ndarray) and p.shape == (5, 2) and p.dtype == np.float32
        assert np.isnan(p).all()
        x = np.arange(7, dtype=np.int32)
        c = launch.pinned_copy(x)
        assert c.dtype == np.int32 and c.tolist() == x.tolist() and not np.shares_memory(c, x)
        assert launch.is_pinned(c) == ON_GPU and launch.is_pinned(p) == ON_GPU
        assert not launch.is_pinned(x) and not launch.is_pinned([1.0]) and not launch.is_pinned(x[:0])
        if ON_GPU:
            big = np.zeros(1 << 20, np.float32)
            with cuda.pinned(big):  # registered pageable memory counts as locked while registered
                assert launch.is_pinned(big) and launch.is_pinned(big[1000:])
            assert not launch.is_pinned(big)

    def test_device_arrays_round_trip(self):
        (d,) = launch.to_device(np.arange(5, dtype=np.float32))
        assert launch.is_device_array(d) and not launch.on_host(d)
        assert launch.result(d, np.zeros(1)).tolist() == [0, 1, 2, 3, 4]

    def test_blocks(self):
        assert launch.blocks(1, 256) == 1 and launch.blocks(257, 256) == 2 and launch.blocks(0, 256) == 1


def test_days_are_found_by_number_and_slug():
    first = days.all_days()[0]
    assert days.find(first.number) == days.find(first.slug) == days.find(f"{first.number:02d}")
    with pytest.raises(days.UnknownDay, match="days that exist"):
        days.find(999)


@pytest.mark.parametrize("arg", ["999", "abc"])
def test_cli_unknown_day_is_one_line_and_exit_2(arg):
    proc = subprocess.run([sys.executable, "-m", "course", "inspect", arg], capture_output=True, text=True,
                          cwd=days.ROOT)
    assert proc.returncode == 2
    assert "days that exist" in proc.stdout and "Traceback" not in proc.stdout + proc.stderr


def test_progress_sees_untouched_exercises_as_not_started():
    from course.cli import exercise_status

    assert exercise_status(days.find(1)) == "not started"


def _copy_of_day(tmp_path, number):
    """A day whose exercise is a temp file (its solution and grader are the real ones)."""
    from types import SimpleNamespace

    info = days.find(number)
    exercise = tmp_path / "exercise.py"
    exercise.write_text(info.exercise_path.read_text())
    return SimpleNamespace(number=info.number, slug=info.slug, solution_path=info.solution_path,
                           test_path=info.test_path, exercise_path=exercise)


def test_progress_counts_the_parts_written_and_grades_only_what_changed(tmp_path, monkeypatch):
    from course import cli

    info = _copy_of_day(tmp_path, 1)
    text = info.exercise_path.read_text()
    stub = next(ln for ln in text.splitlines() if "Day 01: find this thread" in ln)
    info.exercise_path.write_text(text.replace(stub, "    i = cuda.grid(1)\n    if i < out.size:\n"
                                                     "        out[i] = a[i] + b[i]"))
    assert cli.exercise_status(info) == "in progress (1 of 2 parts written)"

    info.exercise_path.write_text(info.solution_path.read_text())  # every part written
    graded = []
    monkeypatch.setattr(cli, "_pytest", lambda *a, **k: graded.append(a) or 0)
    cache = {}
    assert cli.exercise_status(info, cache) == "passing" and len(graded) == 1
    assert cli.exercise_status(info, cache) == "passing" and len(graded) == 1  # unchanged: not re-graded
    info.exercise_path.write_text(info.exercise_path.read_text() + "\n# edited\n")
    monkeypatch.setattr(cli, "_pytest", lambda *a, **k: graded.append(a) or 1)
    assert cli.exercise_status(info, cache) == "failing" and len(graded) == 2


def test_progress_names_the_next_day_and_is_fast_when_nothing_changed():
    import time

    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "course", "progress"], capture_output=True, text=True,
                          cwd=days.ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "next: day " in proc.stdout
    assert time.perf_counter() - start < 30  # generous for a loaded CI machine; ~1 s when idle


def test_inspect_exercise_shows_the_learners_kernels_not_the_solutions():
    proc = subprocess.run([sys.executable, "-m", "course", "inspect", "1", "--exercise"], capture_output=True,
                          text=True, cwd=days.ROOT, env=dict(os.environ, COLUMNS="200"))
    assert proc.returncode == 0, proc.stderr
    assert "exercise.py" in proc.stdout and proc.stdout.count("(not written)") == 2
    solution = subprocess.run([sys.executable, "-m", "course", "inspect", "1"], capture_output=True, text=True,
                              cwd=days.ROOT, env=dict(os.environ, COLUMNS="200"))
    assert "not written" not in solution.stdout and "solutions/day01_vector_add.py" in solution.stdout


def test_bench_without_a_gpu_writes_the_compiler_report_for_json_and_plot(tmp_path):
    import json

    if course.ON_GPU:
        pytest.skip("with a GPU, bench times the kernels (tests never time)")
    out_json, out_png = tmp_path / "r.json", tmp_path / "r.png"
    proc = subprocess.run([sys.executable, "-m", "course", "bench", "1", "--exercise", "--json", str(out_json),
                           "--plot", str(out_png)], capture_output=True, text=True, cwd=days.ROOT)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out_json.read_text())
    assert set(data["kernels"]) == {"naive", "optimized"} and "exercise.py" in data["module"]
    assert out_png.stat().st_size > 1000


def test_a_stub_hint_is_read_whole():
    from course.grading import stub_hint

    hint = stub_hint(days.load_exercise(1).add_naive_kernel)
    assert hint.startswith("Day 01: find this thread's index with cuda.grid(1)") and hint.endswith("(3 lines)")


def test_a_stub_in_a_device_function_the_kernel_calls_is_found():
    """Day 31's pipelined kernel is given; the step it calls (a device function of the same module) is
    the exercise: the kernel counts as unwritten until the step is written, and the solution's as
    written."""
    from course.grading import stub_hint

    exercise = days.load_exercise(31)
    assert "raise NotImplementedError" not in inspect.getsource(exercise.compact_pipelined_kernel.py_func)
    assert stub_hint(exercise.compact_pipelined_kernel).startswith("Day 31: load the next tile")
    assert days.unwritten(exercise, "pipelined").startswith("pipelined is not written yet")
    assert stub_hint(days.load_solution(31).compact_pipelined_kernel) is None


def test_a_wrong_kernel_spec_materialises_as_the_solution_with_its_edits():
    spec = days.ROOT / "tests" / "wrong" / "day08_missing_barrier.py"
    text = days.materialise_mistake(spec).read_text()
    solution = days.find(8).solution_path.read_text()
    def barriers(source):
        return sum(line.strip().startswith("cuda.syncthreads()") for line in source.splitlines())

    assert barriers(text) == barriers(solution) - 1


def test_bench_rechecks_each_row_at_its_own_tolerance():
    """course.bench re-checks a row with the day's VERSION_RTOL for that version, else its RTOL:
    SDPA computes in fp16, and day 88's naive reads an fp16 copy of the int8 cache."""
    from course import bench

    day88, day78, day06 = days.load_solution(88), days.load_solution(78), days.load_solution(6)
    assert bench.version_rtol(day88, "naive") == 5e-2
    assert bench.version_rtol(day88, "optimized") == day88.RTOL
    assert bench.version_rtol(day88, "library") == bench.version_rtol(day78, "library") == day78.LIBRARY_RTOL
    assert bench.version_rtol(day78, "optimized") == day78.RTOL
    assert bench.version_rtol(day06, "optimized") is None  # checking's default for float32
    for n in (79, 80, 81, 82, 89):  # SDPA rows: the fp16 tolerance travels with day 78's contract
        assert bench.version_rtol(days.load_solution(n), "library") == day78.LIBRARY_RTOL, n


def test_a_solution_loads_with_changed_constants():
    """course.days.with_constants (tools/sweep.py): a fresh module whose kernels compile with the new
    values, the derived constants following; the original module untouched; a name not assigned
    exactly once is refused."""
    original = days.load_solution(13)
    variant = days.with_constants(13, COARSEN=2)
    assert variant is not original and variant.COARSEN == 2 and original.COARSEN != 2
    x = original.make_inputs(original.TEST_SIZES[-1], seed=3)
    checking.assert_matches(variant.optimized(*x), original.reference(*x), name="optimized(COARSEN=2)")
    with pytest.raises(ValueError, match="exactly 1"):
        days.with_constants(13, NOT_A_CONSTANT=1)


def test_check_on_a_half_done_day_reports_each_version_once_without_tracebacks(tmp_path):
    import re

    text = days.find(1).exercise_path.read_text()
    naive_stub = re.compile(r'    raise NotImplementedError\("Day 01: find this thread.*?\)"\)\n', re.S)
    assert naive_stub.search(text)
    half = tmp_path / "half.py"
    half.write_text(naive_stub.sub("    i = cuda.grid(1)\n    if i < out.size:\n        out[i] = a[i] + b[i]\n",
                                   text, count=1))
    proc = subprocess.run([sys.executable, "-m", "course", "check", "1", "--target", str(half)], capture_output=True,
                          text=True, cwd=days.ROOT, env=dict(os.environ, COLUMNS="250"))
    out = proc.stdout
    assert proc.returncode == 1
    assert re.search(r"naive\s+│\s+(\d+) / \1\s+│ passing", out), out
    assert re.search(r"optimized\s+│\s+0 / \d+\s+│ not written: optimized: Day 01: from cuda.grid\(1\)", out), out
    assert re.search(r"the\s+(│\s+)*tail \(\d+ lines\)", out), out  # the whole hint, its line count too
    assert out.count("Day 01: from cuda.grid(1)") == 1  # the hint once, not once per test
    assert "Traceback" not in out and "course/grading.py" not in out
    one = subprocess.run([sys.executable, "-m", "course", "check", "1", "--target", str(half), "--version", "naive"],
                         capture_output=True, text=True, cwd=days.ROOT, env=dict(os.environ, COLUMNS="250"))
    assert one.returncode == 0 and "optimized" not in one.stdout.split("your exercise", 1)[1], one.stdout


def test_a_library_row_whose_package_is_missing_is_skipped_with_the_command_that_adds_it():
    from types import SimpleNamespace

    from course import bench

    def library(x):
        import torch_not_installed_here  # noqa: F401

    why = bench.library_missing(SimpleNamespace(library=library), (np.zeros(4),))
    assert "torch_not_installed_here" in why and "pip install torch_not_installed_here" in why
    assert bench.library_missing(SimpleNamespace(library=lambda x: x), (np.zeros(4),)) is None


def test_run_passes_every_option_to_the_engine():
    for argv in (["run", "--help"], ["run", "--", "--help"]):
        proc = subprocess.run([sys.executable, "-m", "course", *argv], capture_output=True, text=True, cwd=days.ROOT)
        assert proc.returncode == 0, proc.stderr
        assert "--requests" in proc.stdout and "unrecognized" not in proc.stderr


def test_readme_says_which_days_exist_and_how_to_start():
    text = (days.ROOT / "README.md").read_text()
    numbers = [d.number for d in days.all_days()]
    spans, start = [], numbers[0]
    for a, b in zip(numbers, numbers[1:] + [None]):
        if b != a + 1:
            spans.append(f"{start:02d}–{a:02d}" if a != start else f"{a:02d}")
            start = b
    intro = text.split("## Quick start")[0]
    for span in spans:
        assert span in intro, f"the README's opening should say days {span} exist"
    assert "## Your first hour" in text and "make check DAY=1" in text and "`make list`" in text


def test_make_setup_repoints_a_venv_that_belongs_to_another_clone():
    import sysconfig

    venv = days.ROOT / ".venv"
    if Path(sys.prefix).resolve() != venv.resolve():
        pytest.skip("runs inside the repository's own .venv (make test)")
    pth = Path(sysconfig.get_paths()["purelib"]) / "gpu_course.pth"
    before = pth.read_text()
    try:
        pth.write_text("/somewhere/else/gpu-course\n")  # as after `cp -r` of a clone
        proc = subprocess.run(["make", "-s", "setup"], cwd=days.ROOT, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        assert pth.read_text().strip() == str(days.ROOT) and "now points at" in proc.stdout
    finally:
        pth.write_text(before)


def test_bench_without_a_gpu_counts_the_traffic_of_each_version():
    if course.ON_GPU:
        pytest.skip("with a GPU, bench times the kernels; --traffic counts in the simulator")
    proc = subprocess.run([sys.executable, "-m", "course", "bench", "5"], capture_output=True, text=True,
                          cwd=days.ROOT, env=dict(os.environ, COLUMNS="250"))
    assert proc.returncode == 0, proc.stderr
    assert "memory traffic in the simulator" in proc.stdout
    assert "energy_aos_kernel" in proc.stdout and "energy_soa_kernel" in proc.stdout
    exercise = subprocess.run([sys.executable, "-m", "course", "bench", "5", "--exercise"], capture_output=True,
                              text=True, cwd=days.ROOT)
    assert exercise.returncode == 0 and "not written" in exercise.stdout


@cuda.jit(device=True)
def _plus_one(v):
    return v + 1


@cuda.jit(device=True)
def _times_two(v):
    return 2 * v


@cuda.jit
def _apply(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = _plus_one(i)


def test_with_globals_compiles_the_same_kernel_with_another_device_function():
    """course.days.with_globals (day 54): the kernel's own code, a replaced global, a fresh kernel."""
    twice = days.with_globals(_apply, _plus_one=_times_two)
    out = np.zeros(37, np.float32)
    twice[1, 64](out)
    np.testing.assert_array_equal(out, 2 * np.arange(37))
    _apply[1, 64](out)
    np.testing.assert_array_equal(out, np.arange(37) + 1)  # the original is untouched
    with pytest.raises(ValueError, match="no global named"):
        days.with_globals(_apply, not_read=_times_two)


@pytest.mark.skipif(course.ON_GPU, reason="tools/launch_types.py records launches in the simulator")
def test_launch_types_names_a_launch_compiled_ahead_under_other_types(monkeypatch):
    """tools/launch_types.py: day 55's kernels launched with their flag as a Python int (int64, where
    KERNELS compiles int32) are named, each with the types KERNELS compiles; launched as int32, none."""
    sys.path.insert(0, str(days.ROOT / "tools"))
    try:
        import launch_types
    finally:
        sys.path.pop(0)
    seen = launch_types.record_launches()
    try:
        entries = launch_types.all_entries()
        misses, _ = launch_types.check_day(55, seen, entries)
        assert misses == [], misses
        sol = days.load_solution(55)
        monkeypatch.setattr(sol, "_exact", lambda approximate: 1 if approximate == "none" else 0)
        misses, _ = launch_types.check_day(55, seen, entries)
        assert len(misses) == 2 and all("int64), KERNELS compiles 55." in m for m in misses), misses
        assert {m.split(":")[0] for m in misses} == {"day 55 naive", "day 55 optimized"}
    finally:
        from numba.cuda.simulator import kernel as sim_kernel

        sim_kernel.FakeCUDAKernel.__call__ = launch_types._SIM_CALL  # the simulator as it was


def test_engine_profile_names_the_serving_loop(capsys, tmp_path):
    """tools/engine_profile.py: one serve() under cProfile, its tables and the written profile; bad
    lengths refused before anything runs."""
    sys.path.insert(0, str(days.ROOT / "tools"))
    try:
        import engine_profile
    finally:
        sys.path.pop(0)
    out = tmp_path / "engine.prof"
    rc = engine_profile.main(["--model", "tiny", "--requests", "3", "--max-prompt", "4", "--max-output", "3",
                              "--block-size", "2", "--kv-blocks", "16", "--top", "5", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0 and out.stat().st_size > 0
    assert "paged engine on" in text and "by cumulative time" in text and "(serve)" in text
    assert engine_profile.main(["--model", "tiny", "--max-prompt", "30", "--max-output", "3"]) == 2
    assert "context of 32 tokens" in capsys.readouterr().err


def _bench_all():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_all", days.ROOT / "tools" / "bench_all.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_all_makes_inputs_ahead_in_workers(tmp_path, capsys):
    """bench_all's workers (course.prepare) hand the timing loop the very inputs and reference that
    `make bench` makes itself; the runner stands in for the GPU."""
    from course import bench

    sol = days.load_solution(27)  # the smallest benchmark size of the course: a worker makes it in a second
    seen = []

    def runner(day, prepared, progress, quiet):
        made = prepared(0)
        assert isinstance(made, bench.Prepared), "the worker's pickle was not found"
        want = sol.make_inputs(sol.BENCH_SIZES[0], seed=1234)
        assert all(np.array_equal(a, b) for a, b in zip(made.inputs, want))
        assert np.array_equal(made.expected, sol.reference(*want))
        assert (made.nbytes, made.flops) == tuple(sol.traffic(*want))
        seen.append(day)
        return bench.Result(days.find(day).slug, "stand-in", "memory", "device copy", 1.0)

    code = _bench_all().main([str(tmp_path), "27", "--jobs", "2"], runner=runner)
    out = capsys.readouterr().out
    assert code == 0, out
    assert seen == [27]
    assert "inputs ready" in out and (tmp_path / f"{days.find(27).slug}.json").exists()
    assert "of it, waiting" in out and "warm 0 s" in out  # the visit's seconds, split


def test_workers_share_a_reference(tmp_path):
    """The attention days share their benchmark problem: the first worker computes its reference, the
    others load it (course.prepare.shared_references)."""
    from course import prepare

    calls = []

    def compute():
        calls.append(1)
        return np.arange(5.0)

    first = prepare.shared_references(tmp_path)("k", compute)
    again = prepare.shared_references(tmp_path)("k", compute)  # another worker's store, the same folder
    assert calls == [1] and np.array_equal(first, again)


def test_bench_all_stops_a_day_past_its_limit(tmp_path, capsys):
    """A day over its --day-limit is reported with the step it was in, and bench_all goes on."""
    import time
    from types import SimpleNamespace

    bench_all = _bench_all()

    class Ready:  # inputs already made: the limit is on the timing alone
        notes, waited_s, seconds = {}, 0.0, {}

        def get(self, info, **waiting):
            return lambda k: None

        def done(self, info):
            pass

        def refill(self):
            pass

        def paused(self):
            import contextlib

            return contextlib.nullcontext()

    def runner(day, prepared, progress, quiet):
        progress("timing the versions")
        time.sleep(30)

    totals = dict.fromkeys(("waiting", "warm", "timed", "check"), 0.0)
    args = SimpleNamespace(day_limit=1.0, out=tmp_path, totals=totals)
    start = time.perf_counter()
    assert bench_all.run_day(days.find(27), Ready(), runner, args) is False
    assert time.perf_counter() - start < 10
    assert "day 27 TIMEOUT over its 1 s limit, while: timing the versions" in capsys.readouterr().out


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["equal", "off", "nan", "zeros", "inf", "float16", "2d"])
def test_compare_on_the_device_agrees_with_the_host(case, monkeypatch):
    """A benchmark's re-check compares where the output is (CuPy on the GPU): the same verdict and the
    same report as the host's comparison, for passing and failing outputs alike. (Outputs under
    DEVICE_COMPARE_MIN_BYTES go to the host: set to 0 here, so these small ones stay on the device.)"""
    monkeypatch.setattr(checking, "DEVICE_COMPARE_MIN_BYTES", 0)
    rng = np.random.default_rng(7)
    ref = rng.standard_normal(100_003).astype(np.float32)
    got = ref * np.float32(1 + 1e-6)
    if case == "off":
        got[[5, 77, 90_000]] += 1.0
    elif case == "nan":
        got[[3, 4]] = np.nan
    elif case == "zeros":
        got = np.zeros_like(ref)
    elif case == "inf":
        ref[[1, 2]] = np.inf
        got[[1, 2]] = [np.inf, 0.5]
    elif case == "float16":
        ref, got = ref.astype(np.float16), got.astype(np.float16)
        got[9] = -got[9]
    elif case == "2d":
        ref, got = ref[:100_000].reshape(400, 250), got[:100_000].reshape(400, 250)
        got[399, 17] = 100.0
    assert checking.device_module(cuda.to_device(got)) is not None
    monkeypatch.setattr(checking, "HOST_UPLOAD_MIN_BYTES", 1 << 62)
    on_host = checking.compare(got, ref)
    import warnings

    # A NumPy output of HOST_UPLOAD_MIN_BYTES or more is copied over and compared on the GPU too.
    monkeypatch.setattr(checking, "HOST_UPLOAD_MIN_BYTES", 0)
    assert checking.device_module(got, host_too=True) is not None and checking.device_module(got) is None
    for device_array in (got, cuda.to_device(got), __import__("cupy").asarray(got)):
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # no quiet fallback to the host
            on_device = checking.compare(device_array, ref)
        assert (on_device.ok, on_device.text) == (on_host.ok, on_host.text)


@pytest.mark.gpu
def test_an_unordered_output_is_sorted_on_the_gpu():
    """bench.sorted_on_gpu (day 31's naive re-check: the kept elements in any order): NumPy, Numba and
    CuPy arrays alike, sorted as NumPy sorts, ties and -inf included."""
    import cupy

    from course import bench

    x = np.random.default_rng(3).integers(-50, 50, 10_007).astype(np.float32)
    x[[4, 9]] = -np.inf
    for a in (x, cuda.to_device(x), cupy.asarray(x)):
        got = bench.sorted_on_gpu(a)
        assert isinstance(got, cupy.ndarray) and np.array_equal(got.get(), np.sort(x))


@cuda.jit
def _big_shared_kernel(out):  # 40 KB of shared memory a block: few blocks fit an SM
    buf = cuda.shared.array(10240, np.float32)
    buf[cuda.threadIdx.x] = cuda.threadIdx.x
    cuda.syncthreads()
    out[cuda.grid(1)] = buf[cuda.threadIdx.x]


def test_resident_blocks_is_capped_and_simulator_safe():
    out = launch.empty((256,), np.float32)
    got = launch.resident_blocks(_big_shared_kernel, 128, out, most=3)
    assert 1 <= got <= 3
    if not course.ON_GPU:
        assert got == 3  # the simulator runs one block at a time: the cap is the answer


@pytest.mark.gpu
def test_resident_blocks_asks_the_driver():
    """40 KB of shared memory a block: an H100/H200 SM (228 KB) holds at most 5, whatever the cap."""
    out = launch.empty((256,), np.float32)
    fits = launch.resident_blocks(_big_shared_kernel, 128, out)
    assert 1 <= fits <= 5
    _big_shared_kernel[2, 128](out)  # the overload resident_blocks compiled is the one the launch runs
    assert len(_big_shared_kernel.overloads) == 1


def _stand_in_gpu(monkeypatch):
    """bench.run with the simulator standing in for the GPU and a stand-in clock (2 ms a call, the
    copy rate 1000 GB/s): its whole path short of the CUDA events."""
    from types import SimpleNamespace

    from course import bench

    class Clock:
        clock, warm_s = "events", 0.25

        def __init__(self, quiet=None):
            self.quiet = quiet

        def time(self, fn, *args, repeats=30):
            fn(*args)
            return 2.0, 0.1

    monkeypatch.setattr(bench, "ON_GPU", True)
    monkeypatch.setattr(bench, "Timer", Clock)
    monkeypatch.setattr(bench, "copy_peak_gbps", lambda timer: 1000.0)
    monkeypatch.setattr(bench, "_PEAKS", {})  # the stand-in rate never outlives the test
    if not course.ON_GPU:  # the simulator's device has no name; a GPU's is used as it is
        monkeypatch.setattr(bench.cuda, "get_current_device", lambda: SimpleNamespace(name=b"stand-in"))
    return bench


def test_bench_run_with_prepared_inputs_end_to_end(monkeypatch):
    """bench.run's whole path (inputs made elsewhere, every version timed, re-checked and rated, where
    its seconds went): what a GPU visit runs, short of the CUDA events."""
    bench = _stand_in_gpu(monkeypatch)
    sol = days.load_solution(1)
    prepared = bench.prepare(sol, 1000)
    steps = []
    result = bench.run_sizes(1, sizes=[1000], prepared=lambda k: prepared, with_library=False, progress=steps.append)
    assert [r.version for r in result.rows] == list(days.versions(sol))
    assert all(r.checked == "ok" for r in result.rows), [r.checked for r in result.rows]
    assert all(set(r.seconds) == {"warm", "timed", "check"} and r.seconds["warm"] == 0.25 for r in result.rows)
    assert result.rows[0].gbps == prepared.nbytes / 2e-3 / 1e9
    assert not any("making the inputs" in s for s in steps)  # made once, elsewhere
    # A wrong version is caught by the re-check, not rated: the reference made elsewhere is what counts.
    wrong = bench.Prepared(prepared.inputs, prepared.expected * 2, prepared.nbytes, prepared.flops)
    result = bench.run(1, 1000, prepared=wrong, with_library=False)
    assert all(r.checked != "ok" for r in result.rows)


def test_bench_times_a_days_bench_versions_after_its_graded_ones(monkeypatch):
    """BENCH_VERSIONS (day 31's direct_on_device: the kept elements and their count, both left on the
    device) are timed after VERSIONS and re-checked through the day's bench_output; a wrong count fails
    the re-check."""
    bench = _stand_in_gpu(monkeypatch)
    sol = days.load_solution(31)
    assert sol.BENCH_VERSIONS == ("direct_on_device",)
    monkeypatch.setattr(sol, "VERSIONS", ("direct",))  # the graded ones cut to one (naive's check needs CuPy)
    result = bench.run(31, 1000, with_library=False)
    assert [r.version for r in result.rows] == ["direct", "direct_on_device"]
    assert all(r.checked == "ok" for r in result.rows), [(r.version, r.checked) for r in result.rows]
    real = sol.direct_on_device

    def count_one_short(x, threshold):
        out, count = real(x, threshold)
        return out, cuda.to_device(checking.to_host(count) - 1)

    monkeypatch.setattr(sol, "direct_on_device", count_one_short)
    target = days.load_target(31)
    monkeypatch.setattr(target, "direct_on_device", count_one_short)
    result = bench.run(31, 1000, versions=["direct_on_device"], with_library=False)
    assert result.rows[0].checked != "ok", result.rows[0].checked


def test_a_peak_measured_moments_ago_is_reused(monkeypatch):
    """bench.recent_peak: within PEAK_MAX_AGE_S of a measurement the same key gets that rate and its
    age; another key, or an older one, is measured again."""
    from course import bench

    monkeypatch.setattr(bench, "_PEAKS", {})
    now = [1000.0]
    monkeypatch.setattr(bench.time, "monotonic", lambda: now[0])
    calls = []

    def measure(rate):
        return lambda: calls.append(rate) or rate

    assert bench.recent_peak(("copy",), measure(3000.0)) == (3000.0, None)
    now[0] += bench.PEAK_MAX_AGE_S / 2
    assert bench.recent_peak(("copy",), measure(1.0)) == (3000.0, bench.PEAK_MAX_AGE_S / 2)
    assert bench.recent_peak(("gemm", "float16"), measure(700.0)) == (700.0, None)
    now[0] += bench.PEAK_MAX_AGE_S
    assert bench.recent_peak(("copy",), measure(4000.0)) == (4000.0, None)
    assert calls == [3000.0, 700.0, 4000.0]


@pytest.mark.gpu
def test_a_slow_version_counts_its_last_warm_up_as_a_sample():
    """A call of over a second, compiled, is not called again for its first sample: two warm-up calls
    (the first may compile), then SLOW_REPEATS samples of which the second warm-up is the first."""
    import time

    from course import bench

    calls = []

    def slow():
        calls.append(1)
        time.sleep(bench.SLOW_MS * 1.05e-3)

    ms, _ = bench.Timer().time(slow)
    assert len(calls) == 2 + bench.SLOW_REPEATS - 1, f"{len(calls)} calls"
    assert bench.SLOW_MS < ms < bench.SLOW_MS * 1.3, ms


@pytest.mark.gpu
def test_the_wall_clock_probe_ignores_a_single_stall():
    """Timer.waits_for_gpu: a call that synchronizes waits at every probe (timed by the wall clock);
    one whose first call stalls on the host past the probe's spin, and never again, is not."""
    import time

    from course import bench

    timer = bench.Timer()
    stalls = [20e-3]  # four times the probe's 5 ms spin

    def stalls_once():
        time.sleep(stalls.pop() if stalls else 0.0)

    assert timer.waits_for_gpu(cuda.synchronize)
    assert not timer.waits_for_gpu(stalls_once)
    assert not stalls, "the stalling call was never probed"


def test_cuda_array_interface_sync_is_off():
    """course.device turns off Numba's synchronisation on a CuPy argument's stream (see there)."""
    from numba.cuda.core import config

    assert config.CUDA_ARRAY_INTERFACE_SYNC == 0


@pytest.mark.gpu
def test_a_cupy_argument_does_not_stall_the_host():
    """With a 20 ms spin queued, a launch taking a CuPy array returns before the spin ends: the host
    goes on queueing while the GPU works (with Numba's default sync it would wait for the spin)."""
    import cupy

    from course import bench

    x = cupy.zeros(256, dtype=cupy.float32)
    _big_shared_kernel[2, 128](x)  # compiled outside the probe
    cuda.synchronize()
    bench._spin[1, 1](20_000_000)
    after_spin = cuda.event()
    after_spin.record()
    _big_shared_kernel[2, 128](x)
    waited = after_spin.query()
    cuda.synchronize()
    assert not waited, "the launch waited for the GPU: NUMBA_CUDA_ARRAY_INTERFACE_SYNC is not 0"
    assert cupy.asnumpy(x)[:128].tolist() == list(range(128))


@pytest.mark.parametrize("registers, warps", [(32, 64), (40, 51), (56, 36), (66, 28), (128, 16), (255, 8)])
def test_warps_an_sm_holds_at_a_register_count(registers, warps):
    """sm_90's register file: 65,536 registers, allocated to a warp 256 at a time, at most 64 warps."""
    from course.compiler import KernelReport

    assert KernelReport("k", registers=registers).warps_by_registers == warps


def _loop_loads(ptx: str) -> list[list[str]]:
    """For each loop of a kernel's PTX (a label that a later branch jumps back to): its load instructions."""
    import re

    body = [ln.split("//")[0].strip() for ln in ptx.splitlines()]
    loops = []
    for i, line in enumerate(body):
        label = re.match(r"^(\$\w+):$", line)
        if not label:
            continue
        jump = re.compile(rf"\bbra(\.uni)?\s+{re.escape(label.group(1))};")
        back = [j for j in range(i + 1, len(body)) if jump.search(body[j])]
        if back:
            loops.append([ln for ln in body[i:back[-1]] if ln.startswith("ld.") and not ln.startswith("ld.param")])
    return loops


def test_a_relaxed_load_stays_in_its_spin_loop():
    """course.flags.load_relaxed: the status word is loaded again every time round (ld.relaxed.gpu inside
    the loop), where a plain load is hoisted out and the spin never sees another block's write."""
    from course import compiler

    reports = compiler.reports(days.ROOT / "tests" / "spin_kernels.py")
    relaxed = _loop_loads(reports["relaxed"].ptx)
    assert relaxed and all(any(ln.startswith("ld.relaxed.gpu.b64") for ln in loop) for loop in relaxed), relaxed
    plain = _loop_loads(reports["plain"].ptx)
    assert plain and not any(plain), f"a plain load stayed in the loop: {plain}"  # what the relaxed load is for


def test_workers_run_ahead_past_finished_days(tmp_path):
    """A finished worker does not hold its place: with one worker and room for three days, the second
    and third days are made while the first waits for its turn, one after another, each timed."""
    import time

    from course import prepare

    infos = [days.find(d) for d in (27, 2, 17)]  # a few seconds each on one core
    ahead = prepare.Ahead(infos, tmp_path, jobs=1, keep=3)
    try:
        assert len(ahead.running) == 1, "one worker at a time"
        deadline = time.perf_counter() + 120
        while len(ahead.seconds) < 3 and time.perf_counter() < deadline:
            ahead.refill()  # what get() does while it waits
            time.sleep(0.2)
        assert set(ahead.seconds) == {i.slug for i in infos}, f"made ahead: {sorted(ahead.seconds)}"
        assert all(s > 0 for s in ahead.seconds.values())
        for info in infos:
            prepared = ahead.get(info)
            assert prepared is not None and prepared(0) is not None, f"{info.slug}: no inputs"
            assert ahead.waited_s < 5, f"{info.slug} was made ahead, yet its turn waited {ahead.waited_s:.1f} s"
            ahead.done(info)
    finally:
        ahead.close()


def test_a_day_flagged_early_gets_the_first_worker(tmp_path):
    """BENCH_PREPARE_EARLY (the attention days' minutes-long float64 references) puts a day's worker first,
    wherever it comes in the timing order; the others keep theirs."""
    from course import prepare

    assert days.constants(days.find(65).solution_path).get("BENCH_PREPARE_EARLY") is True
    infos = [days.find(d) for d in (2, 17, 65)]
    ahead = prepare.Ahead(infos, tmp_path, jobs=1, keep=3)
    try:
        assert list(ahead.running) == [days.find(65).slug], f"started first: {list(ahead.running)}"
        assert [i.number for i in ahead.queue] == [2, 17], "the rest keep the timing order"
    finally:
        ahead.close()  # the day-65 worker would compute a 2-TFLOP float64 reference: stopped here


def test_a_day_flagged_early_leaves_the_places_ahead_to_the_others(tmp_path):
    """A day flagged early is made minutes before its turn on purpose: it is not counted among the
    ``keep`` days ahead, so with room for two, the days in timing order still get two places."""
    import time

    from course import prepare

    infos = [days.find(d) for d in (2, 17, 65)]
    ahead = prepare.Ahead(infos, tmp_path, jobs=2, keep=2)
    try:
        assert set(ahead.running) == {days.find(65).slug, days.find(2).slug}
        deadline = time.perf_counter() + 120
        while days.find(2).slug not in ahead.seconds and time.perf_counter() < deadline:
            time.sleep(0.2)
            ahead.refill()
        assert days.find(17).slug in ahead.running, (
            f"day 2 finished and day 17 did not start: running {sorted(ahead.running)}, keep {ahead.keep}")
    finally:
        ahead.close()


def test_workers_pause_around_wall_clock_timing(tmp_path):
    """prepare.Ahead.paused stops the workers still running (state T) and continues them after; a
    finished worker is left alone. bench_all hands it to the timer for rows timed by the wall clock."""
    import signal
    import subprocess
    import time

    from course import prepare

    ahead = prepare.Ahead([], tmp_path, jobs=1)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()
    ahead.running = {"a": sleeper, "b": finished}

    def state(p):
        return Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]

    try:
        with ahead.paused() as stopped:
            assert stopped == 1
            for _ in range(100):
                if state(sleeper) == "T":
                    break
                time.sleep(0.01)
            assert state(sleeper) == "T", "the running worker was not stopped"
        for _ in range(100):
            if state(sleeper) != "T":
                break
            time.sleep(0.01)
        assert state(sleeper) in ("S", "R"), "the worker was not continued"
    finally:
        sleeper.send_signal(signal.SIGKILL)
        sleeper.wait()


def test_compaction_bound_oracle_words_are_what_the_kernel_publishes():
    """tools/compaction_bound.py's oracle: status words prefilled with every tile's inclusive prefix are
    the words day 31's direct kernel leaves behind when it runs from zeroed ones, and the kernel run over
    the prefilled words keeps the same elements in the same order; block shapes are parsed and refused."""
    import argparse

    sys.path.insert(0, str(days.ROOT / "tools"))
    try:
        import compaction_bound
    finally:
        sys.path.pop(0)
    assert compaction_bound.parse_shapes("128x32, 64x4") == [(128, 32), (64, 4)]
    for bad in ("128", "100x4", "128x0", "2048x1", "axb"):
        with pytest.raises(argparse.ArgumentTypeError):
            compaction_bound.parse_shapes(bad)
    with pytest.raises(SystemExit):  # an oracle shape that --direct does not time
        compaction_bound.main(["--direct", "128x32", "--oracle", "256x16"])
    from course import cuda

    sol = days.load_solution(31)
    x, t = sol.make_inputs(3 * sol.DIRECT_TILE + 5, seed=3)
    tiles = 4
    words = compaction_bound.status_prefilled(sol, x, t, sol.DIRECT_TILE, tiles)
    want = sol.reference(x, t)
    for start in (np.zeros(tiles, np.uint64), words):
        status, counter = cuda.to_device(start.copy()), cuda.to_device(np.zeros(2, np.int32))
        out = cuda.to_device(np.full(x.shape[0], np.nan, np.float32))
        sol.compact_direct_kernel[tiles, sol.DIRECT_THREADS](cuda.to_device(x), np.float32(t), status, counter, out)
        kept = int(counter.copy_to_host()[1])
        assert np.array_equal(out.copy_to_host()[:kept], want)
        assert np.array_equal(status.copy_to_host(), words)
