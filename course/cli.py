"""The course's command line: ``python -m course <command>`` (the Makefile's targets call it).

    list               the days that exist
    progress           per day: topic, memory space, your exercise's status
    check N            grade your exercise for day N
    bench N            naive vs optimized (GPU: times; no GPU: the compiler's view)
    inspect N          registers, shared/local memory, spills, memory-space instructions
    run                the destination: the newest complete day end to end
    notebooks [N]      execute notebooks headless
    exercises [N ...]  write days/dayNN_*/exercise.py from the solutions' markers (--check: exit 1 on drift)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from rich.console import Console
from rich.table import Table

import course
from course import days

console = Console(highlight=False, width=None if sys.stdout.isatty() else 150)


def _banner() -> None:
    console.print(course.DEVICE.describe(), markup=False)


def _day(value: str) -> days.DayInfo:
    try:
        return days.find(value)
    except days.UnknownDay as exc:
        raise SystemExit(_fail(str(exc))) from None


def _fail(message: str) -> int:
    console.print(f"error: {message}", style="red")
    return 2


def _pytest(info: days.DayInfo, target: str, *extra: str, quiet: bool = False) -> int:
    env = dict(os.environ, COURSE_TARGET=target)
    cmd = [sys.executable, "-m", "pytest", str(info.test_path), "-q", "--tb=short", "-p", "no:cacheprovider",
           *extra]
    out = subprocess.DEVNULL if quiet else None
    return subprocess.run(cmd, env=env, cwd=days.ROOT, stdout=out, stderr=out).returncode


# ---- list / progress ---------------------------------------------------------------------------------

def cmd_list(args) -> int:
    table = Table("day", "topic", "memory space", "complete")
    for d in days.all_days():
        table.add_row(f"{d.number:02d}", d.title, d.memory_space, "yes" if d.complete else "no")
    console.print(table)
    return 0


STUB = 'raise NotImplementedError("Day'
PROGRESS_CACHE = days.ROOT / ".course" / "progress.json"


def _graded_key(info: days.DayInfo) -> str:
    """What a grade depends on: the exercise, the solution and the grader, by content."""
    import hashlib

    h = hashlib.sha256()
    for path in (info.exercise_path, info.solution_path, info.test_path):
        h.update(path.read_bytes() if path.exists() else b"-")
    return h.hexdigest()


def _load_cache() -> dict:
    import json

    try:
        return json.loads(PROGRESS_CACHE.read_text())
    except (OSError, ValueError):
        return {}


def _save_cache(cache: dict) -> None:
    import json

    try:
        PROGRESS_CACHE.parent.mkdir(exist_ok=True)
        PROGRESS_CACHE.write_text(json.dumps(cache, indent=1, sort_keys=True))
    except OSError:
        pass  # a read-only checkout still shows progress, it only re-grades next time


def exercise_status(info: days.DayInfo, cache: dict | None = None) -> str:
    """not started (the exercise as generated) / in progress (k of m parts written) / failing /
    passing. The grader runs only when the exercise, its solution or its grader changed since the
    last recorded result (``cache``, keyed by content)."""
    from course import exercises

    if not info.exercise_path.exists():
        return "no exercise"
    text = info.exercise_path.read_text()
    try:
        pristine = exercises.expected(info)
    except exercises.MarkerError:
        pristine = None
    if text == pristine:
        return "not started"
    parts = pristine.count(STUB) if pristine else 0
    left = text.count(STUB)
    if left:
        return f"in progress ({max(parts - left, 0)} of {parts} parts written)" if parts else "in progress"
    cache = cache if cache is not None else {}
    key = _graded_key(info)
    if cache.get(info.slug, {}).get("key") != key:
        status = "passing" if _pytest(info, "exercise", "-x", quiet=True) == 0 else "failing"
        cache[info.slug] = {"key": key, "status": status}
    return cache[info.slug]["status"]


def cmd_progress(args) -> int:
    table = Table("day", "topic", "memory space", "exercise")
    colours = {"passing": "green", "failing": "red", "not started": "dim"}
    cache = _load_cache()
    following = None
    for d in days.all_days():
        status = exercise_status(d, cache)
        if following is None and status != "passing":
            following = d
        table.add_row(f"{d.number:02d}", d.title, d.memory_space,
                      f"[{colours.get(status.split(' (')[0], 'yellow')}]{status}[/]")
    _save_cache(cache)
    console.print(table)
    if following is None:
        console.print("every day passes: try `make run`")
    else:
        console.print(f"next: day {following.number:02d} ({following.title}): lessons/{following.slug}.md, "
                      f"then make check DAY={following.number}")
    return 0


# ---- check -------------------------------------------------------------------------------------------

def cmd_check(args) -> int:
    info = _day(args.day)
    console.print(f"grading days/{info.slug}/exercise.py against {info.test_path.relative_to(days.ROOT)}")
    code = _pytest(info, "exercise")
    console.print("[green]passing[/]" if code == 0 else "[red]not passing yet[/] (the messages above say why)")
    return 0 if code == 0 else 1


# ---- inspect -----------------------------------------------------------------------------------------

def _compiler_table(module, title: str, reports: dict | None = None) -> Table:
    from course import compiler
    from course.grading import stub_hint

    table = Table("kernel", "regs", "smem B", "stack B", "spill st/ld", "ld/st.shared", "ld.const",
                  "ld/st.local", "shfl", "bar", "atom", "global ld", title=title)
    kernels = getattr(module, "KERNELS", {})
    for label, r in (reports if reports is not None else compiler.reports(module)).items():
        c = r.count
        stub = label in kernels and stub_hint(kernels[label][0])
        table.add_row(f"{label} [yellow](not written)[/]" if stub else label, str(r.registers), str(r.shared_bytes),
                      str(r.stack_bytes), f"{r.spill_stores}/{r.spill_loads}", f"{c('ld.shared')}/{c('st.shared')}",
                      str(c("ld.const")), f"{c('ld.local')}/{c('st.local')}", str(c("shfl.sync")), str(c("bar.sync")),
                      str(c("atom")), str(c("ld.global") + c("ld (generic)")))
    return table


def _module(info: days.DayInfo, exercise: bool):
    """The learner's exercise (``--exercise``) or the solution: never whatever COURSE_TARGET says."""
    return days.load_exercise(info.number) if exercise else days.load_solution(info.number)


def _which(info: days.DayInfo, exercise: bool) -> str:
    return f"your days/{info.slug}/exercise.py" if exercise else f"solutions/{info.slug}.py"


def cmd_inspect(args) -> int:
    from course import compiler

    info = _day(args.day)
    module = _module(info, args.exercise)
    reports = compiler.reports(module)
    console.print(_compiler_table(module, f"day {info.number:02d}, {_which(info, args.exercise)}: "
                                          "PTX for sm_90 + nvJitLink report", reports))
    if args.ptx:
        for label, r in reports.items():
            console.rule(label)
            console.print(r.ptx, markup=False)
    return 0


def _compiler_files(args, info: days.DayInfo, module, reports: dict) -> None:
    """Without a GPU, --json and --plot write the compiler's view instead of times (never nothing)."""
    import dataclasses
    import json

    if args.json:
        data = {"day": info.slug, "module": _which(info, args.exercise), "device": "none (compiler report only)",
                "kernels": {k: {f.name: getattr(r, f.name) for f in dataclasses.fields(r) if f.name != "ptx"}
                            for k, r in reports.items()}}
        with open(args.json, "w") as fh:
            json.dump(data, fh, indent=2)
        console.print(f"wrote {args.json} (the compiler report: times need a GPU)")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        from course import plots

        plots.compiler_chart(reports, args.plot, title=f"day {info.number:02d}: what the compiler did "
                                                        f"({'your exercise' if args.exercise else 'solution'})")
        console.print(f"wrote {args.plot} (the compiler report: times need a GPU)")


# ---- bench -------------------------------------------------------------------------------------------

def _bench_table(result) -> Table:
    unit = "GB/s" if result.bound == "memory" else "TFLOP/s"
    table = Table("version", "n", "time", unit, "% of peak", "speedup", "check",
                  title=f"{result.day} on {result.device}; peak = {result.peak_name} "
                        f"{result.peak_value:,.0f} {unit} (measured now)")
    for r in result.rows:
        rate = r.gbps if result.bound == "memory" else r.tflops
        table.add_row(r.version, str(r.n), f"{r.ms * 1e3:,.1f} us", f"{rate:,.1f}", f"{r.pct_peak:.1f} %",
                      f"{r.speedup:.2f}x", r.checked)
    return table


def cmd_bench(args) -> int:
    info = _day(args.day)
    if not course.ON_GPU:
        from course import compiler

        console.print("[yellow]times need a CUDA GPU[/]: here is what is real on a CPU, the compiler's view "
                      "of each version (registers, on-chip memory, spills, memory-space instructions).")
        sol = days.load_solution(info.number)
        module = _module(info, args.exercise)
        reports = compiler.reports(module)
        console.print(_compiler_table(module, f"day {info.number:02d}: {info.title} ({_which(info, args.exercise)})",
                                      reports))
        n = sol.BENCH_SIZES[0]
        console.print(f"at the benchmark size n={n}: minimum traffic {_traffic_text(sol, n)}")
        _compiler_files(args, info, module, reports)
        return 0
    from rich.progress import Progress

    from course import bench

    n = _parse_n(args.n) if args.n else None
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("benchmark", total=None)
        result = bench.run(info.number, n, repeats=args.repeats, target=_module(info, args.exercise),
                           progress=lambda msg: progress.update(task, description=msg))
    console.print(_bench_table(result))
    if args.json:
        bench.save_json(result, args.json)
        console.print(f"wrote {args.json}")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        from course import plots

        plots.bench_chart(result, args.plot)
        console.print(f"wrote {args.plot}")
    return 0 if all(r.checked == "ok" for r in result.rows) else 1


def _parse_n(text: str):
    parts = [int(p) for p in text.replace("x", ",").split(",")]
    return parts[0] if len(parts) == 1 else tuple(parts)


def _traffic_text(sol, n) -> str:
    if not hasattr(sol, "traffic"):
        return "not stated"
    try:
        inputs = sol.make_inputs(n, seed=0)
    except MemoryError:
        return "too large to build here"
    nbytes, flops = sol.traffic(*inputs)
    return f"{nbytes / 1e6:,.1f} MB, {flops / 1e6:,.1f} MFLOP"


# ---- run ---------------------------------------------------------------------------------------------

CAPSTONE_DAY = 90


def cmd_run(args) -> int:
    complete = [d for d in days.all_days() if d.complete]
    if not complete:
        return _fail("no complete day yet")
    info = complete[-1]
    if info.number == CAPSTONE_DAY:
        console.print(f"the destination: [bold]day {info.number} — {info.title}[/]")
        return days.load_solution(info.number).main(args.rest)
    console.print(f"the newest complete day: [bold]day {info.number:02d} — {info.title}[/] "
                  f"(memory space: {info.memory_space})")
    if course.ON_GPU:
        args.day, args.n, args.repeats, args.json, args.plot = str(info.number), None, 30, None, None
        return cmd_bench(args)
    from course import checking

    sol = days.load_solution(info.number)
    n = sol.TEST_SIZES[-1]
    inputs = sol.make_inputs(n, seed=0)
    expected = sol.reference(*inputs)
    table = Table("version", "n", "simulated in", "check against NumPy",
                  title="in the simulator: correctness (times need a GPU)")
    ok = True
    for version in days.versions(sol):
        start = time.perf_counter()
        got = getattr(sol, version)(*inputs)
        seconds = time.perf_counter() - start
        report = checking.compare(got, expected, name=version)
        ok &= report.ok
        table.add_row(version, str(n), f"{seconds:.2f} s", report.text)
    console.print(table)
    console.print(_compiler_table(sol, "the compiler's view (sm_90)"))
    return 0 if ok else 1


# ---- notebooks ---------------------------------------------------------------------------------------

_kernel_start_lock = None  # set in each notebook worker process: see cmd_notebooks


def _init_notebook_worker(lock) -> None:
    global _kernel_start_lock
    _kernel_start_lock = lock


def _execute_notebook(path: str) -> tuple[str, float, str | None]:
    """Run one notebook headless in a fresh kernel; (name, seconds, error or None). Outputs are not saved."""
    import contextlib

    import nbformat
    from nbclient import NotebookClient

    start = time.perf_counter()
    nb = nbformat.read(path, as_version=4)
    try:
        client = NotebookClient(nb, timeout=900, kernel_name="python3",
                                resources={"metadata": {"path": os.path.dirname(path)}})
        # A kernel's ports are picked free, then bound by the kernel a moment later: two workers
        # starting kernels at once can pick the same port. One start at a time, until it is ready.
        with _kernel_start_lock or contextlib.nullcontext():
            client.km = client.create_kernel_manager()
            client.start_new_kernel()
            client.start_new_kernel_client()
        client.execute()  # reuses the started kernel, and shuts it down at the end
        return os.path.basename(path), time.perf_counter() - start, None
    except Exception as exc:
        return os.path.basename(path), time.perf_counter() - start, str(exc)[-2000:]


def cmd_notebooks(args) -> int:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    infos = [_day(args.day)] if args.day else [d for d in days.all_days() if d.notebook_path.exists()]
    failed = []
    # One kernel per core: notebooks are independent, and each simulated kernel keeps one core busy.
    with ProcessPoolExecutor(max_workers=min(len(infos), os.cpu_count() or 2), initializer=_init_notebook_worker,
                             initargs=(multiprocessing.Lock(),)) as pool:
        for name, seconds, error in pool.map(_execute_notebook, [str(i.notebook_path) for i in infos]):
            if error is None:
                console.print(f"[green]ok[/]     {name} ({seconds:.0f} s)")
            else:
                failed.append(name)
                console.print(f"[red]failed[/] {name}: {error}", markup=False)
    console.print(f"{len(infos) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


def cmd_exercises(args) -> int:
    from course import exercises

    try:
        selected = [_day(d).number for d in args.days]
        if args.check:
            problems = exercises.check(selected)
            for line in problems:
                console.print(f"[red]drift[/]  {line}", markup=True)
            if problems:
                console.print(f"{len(problems)} exercise(s) differ from their solutions: run "
                              "`make exercises` and commit the result")
                return 1
            console.print("every exercise is what its solution's markers make")
            return 0
        changed = exercises.write(selected)
    except exercises.MarkerError as exc:
        return _fail(str(exc))
    for path in changed:
        console.print(f"wrote {path.relative_to(days.ROOT)}")
    console.print(f"{len(changed)} exercise(s) written, the rest already up to date")
    return 0


# ---- entry -------------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m course", description="GPU kernel engineering, one day at a time")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the days that exist").set_defaults(fn=cmd_list)
    sub.add_parser("progress", help="your exercise's status, per day").set_defaults(fn=cmd_progress)
    c = sub.add_parser("check", help="grade your exercise for a day")
    c.add_argument("day")
    c.set_defaults(fn=cmd_check)
    b = sub.add_parser("bench", help="naive vs optimized")
    b.add_argument("day")
    b.add_argument("--n", help="problem size (e.g. 67108864 or 4096x4096); default: the day's BENCH_SIZES[0]")
    b.add_argument("--repeats", type=int, default=30)
    b.add_argument("--plot", metavar="PNG")
    b.add_argument("--json", metavar="FILE")
    b.add_argument("--exercise", action="store_true", help="time (or, without a GPU, inspect) your exercise")
    b.set_defaults(fn=cmd_bench)
    i = sub.add_parser("inspect", help="what the compiler did with each kernel")
    i.add_argument("day")
    i.add_argument("--exercise", action="store_true", help="inspect your exercise instead of the solution")
    i.add_argument("--ptx", action="store_true", help="print the PTX too")
    i.set_defaults(fn=cmd_inspect)
    r = sub.add_parser("run", help="the capstone serving engine (or, until it exists, the newest complete day)")
    r.add_argument("rest", nargs=argparse.REMAINDER, help="options for the serving engine (see run -- --help)")
    r.set_defaults(fn=cmd_run)
    n = sub.add_parser("notebooks", help="execute notebooks headless")
    n.add_argument("day", nargs="?")
    n.set_defaults(fn=cmd_notebooks)
    e = sub.add_parser("exercises", help="write each exercise from its solution's markers")
    e.add_argument("days", nargs="*", help="day numbers (default: every day)")
    e.add_argument("--check", action="store_true", help="write nothing; exit 1 naming each exercise that differs")
    e.set_defaults(fn=cmd_exercises)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.command in ("check", "bench", "inspect") and not args.day:
        return _fail(f"say which day: make {args.command} DAY=N (days: "
                     f"{', '.join(str(d.number) for d in days.all_days())})")
    if args.command != "exercises":
        _banner()
    return args.fn(args)
