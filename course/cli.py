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
import re
import subprocess
import sys
import time

from rich.console import Console
from rich.markup import escape
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

NOT_WRITTEN = re.compile(r"^(?:Failed: )?(?P<label>[\w.]+) is not written yet: (?P<hint>.*)$", re.S)


def _graded_cases(xml_path) -> list[dict]:
    """Per test of a junit report: id, outcome (passed / failed / skipped), message, text."""
    import xml.etree.ElementTree as ET

    cases = []
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        skipped = case.find("skipped")
        if bad is not None:
            outcome, node = "failed", bad
        elif skipped is not None:
            outcome, node = "skipped", skipped
        else:
            outcome, node = "passed", None
        cases.append({"id": case.get("name"), "outcome": outcome,
                      "message": (node.get("message") or "") if node is not None else "",
                      "text": (node.text or "") if node is not None else ""})
    return cases


def _version_of(case_id: str, versions) -> str:
    """The version a test grades: the first of its parameters, or a version named in the test's name."""
    params = case_id.split("[", 1)[1].rstrip("]").split("-") if "[" in case_id else []
    for v in versions:
        if v in params or f"_{v}_" in f"_{case_id.split('[')[0]}_":
            return v
    return "all versions"


def _learner_lines(text: str, slug: str) -> list[str]:
    """The traceback lines that point into the learner's own file (none from course/ or libraries)."""
    return [ln for ln in text.splitlines() if f"{slug}/exercise.py" in ln or "exercise.py:" in ln]


def cmd_check(args) -> int:
    import tempfile

    info = _day(args.day)
    sol = days.load_solution(info.number)
    versions = list(days.versions(sol))
    if args.version and args.version not in versions:
        return _fail(f"day {info.number:02d} has no version {args.version!r}: its versions are {', '.join(versions)}")
    if args.target and not os.path.exists(args.target):
        return _fail(f"no file {args.target}")
    console.print(f"grading {args.target or f'days/{info.slug}/exercise.py'} against "
                  f"{info.test_path.relative_to(days.ROOT)}"
                  + (f", version {args.version} only" if args.version else ""))
    with tempfile.TemporaryDirectory() as tmp:
        xml = os.path.join(tmp, "report.xml")
        extra = ["-k", args.version] if args.version else []
        _pytest(info, args.target or "exercise", "--tb=short", "-rN", "--no-header", f"--junitxml={xml}", "-o",
                "junit_family=xunit2", *extra, quiet=True)
        if not os.path.exists(xml):
            return _fail("the grader did not run (is the exercise importable? try: python "
                         f"days/{info.slug}/exercise.py)")
        cases = _graded_cases(xml)
    if args.version:
        cases = [c for c in cases if _version_of(c["id"], versions) == args.version]
    rows: dict[str, dict] = {}
    for c in cases:
        row = rows.setdefault(_version_of(c["id"], versions), {"passed": 0, "total": 0, "skipped": 0,
                                                                 "hint": None, "first": None})
        if c["outcome"] == "skipped":
            row["skipped"] += 1
            row.setdefault("why", c["message"])
            continue
        row["total"] += 1
        if c["outcome"] == "passed":
            row["passed"] += 1
            continue
        stub = NOT_WRITTEN.match(c["message"].strip())
        if stub:
            row["hint"] = row["hint"] or escape(f"{stub['label']}: {stub['hint']}")
            continue
        if row["first"] is None:
            row["first"] = escape(c["message"].splitlines()[0] if c["message"] else c["id"])
        console.rule(c["id"], style="red")
        message = c["message"].strip()
        if not message or message == "collection failure":  # e.g. a syntax error: the file could not load
            message = "\n".join(ln for ln in c["text"].strip().splitlines()[-8:]
                                 if not any(k in ln for k in ("site-packages", "<frozen", "???")))
            row["first"] = escape(message.splitlines()[-1]) if message else row["first"]
        console.print(message, markup=False)
        for line in _learner_lines(c["text"], info.slug):
            console.print(f"  {line.strip()}", markup=False)
    table = Table("version", "tests passed", "status", title=f"day {info.number:02d}: your exercise")
    skipped = 0
    shown: dict[str, str] = {}  # a hint is printed once, in the first row that waits for it
    for version in [*versions, "all versions"]:
        row = rows.get(version)
        if not row:
            continue
        skipped += row["skipped"]
        if not row["total"]:
            continue
        if row["passed"] == row["total"]:
            status = "[green]passing[/]"
        elif row["hint"] and row["hint"] in shown:
            status = f"[yellow]waits for {shown[row['hint']]}[/] (not written)"
        elif row["hint"]:
            status = f"[yellow]not written[/]: {row['hint']}"
            shown[row["hint"]] = version
        else:
            status = f"[red]failing[/]: {row['first']}"
        table.add_row(version, f"{row['passed']} / {row['total']}", status)
    console.print(table)
    if skipped:
        whys = {r.get("why", "") for r in rows.values() if r["skipped"]}
        console.print(f"{skipped} test(s) skipped: {'; '.join(sorted(w for w in whys if w)) or 'see the grader'}")
    ok = bool(cases) and all(c["outcome"] != "failed" for c in cases)
    console.print("[green]passing[/]" if ok else "[red]not passing yet[/]")
    return 0 if ok else 1


# ---- inspect -----------------------------------------------------------------------------------------

def _compiler_table(module, title: str, reports: dict | None = None) -> Table:
    from course import compiler
    from course.grading import stub_hint

    table = Table("kernel", "regs", "warps/SM", "smem B", "stack B", "spill st/ld", "ld/st.shared", "ld.const",
                  "ld/st.local", "shfl", "bar", "atom", "global ld", title=title,
                  caption="warps/SM: the most an SM holds at this register count (sm_90; blocks are resident whole)")
    kernels = getattr(module, "KERNELS", {})
    for label, r in (reports if reports is not None else compiler.reports(module)).items():
        c = r.count
        stub = label in kernels and stub_hint(kernels[label][0])
        table.add_row(f"{label} [yellow](not written)[/]" if stub else label, str(r.registers),
                      str(r.warps_by_registers), str(r.shared_bytes),
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
    for row, why in result.skipped.items():
        table.add_row(row, "", "not timed", "", "", "", why)
    return table


def _print_traffic(info: days.DayInfo, sol, module) -> None:
    """Each version run once in the simulator at the largest test size: requests, sectors, wavefronts."""
    from course import traffic

    n = sol.TEST_SIZES[-1]
    table = Table("version", "kernel", "launches", "ld req", "sectors/ld", "st req", "sectors/st", "sector bytes",
                  "x minimum", "shared req", "wavefronts/req",
                  title=f"day {info.number:02d}: memory traffic in the simulator at n={n} "
                        "(as Nsight Compute counts it)")
    for version in days.versions(sol):
        if version not in days.sim_versions(sol):
            table.add_row(version, "(GPU only: not run in the simulator)", *[""] * 9)
            continue
        missing = days.unwritten(module, version)
        if missing:
            table.add_row(version, escape(f"not written: {missing.split(': ', 1)[1]}"), *[""] * 9)
            continue
        try:
            (measured,) = traffic.measure_day(module, sol, n, versions=[version])
        except Exception as exc:  # the learner's kernel may fail: say how, keep the other rows
            table.add_row(version, escape(f"failed: {type(exc).__name__}: {exc}".splitlines()[0][:100]), *[""] * 9)
            continue
        if not measured.kernels:
            table.add_row(version, "(no kernel launched)", *[""] * 9)
        for k in measured.kernels:
            share = f"{k.global_bytes / measured.minimum_bytes:.2f}x" if measured.minimum_bytes else ""
            table.add_row(version, k.name, str(k.launches), str(k.global_load_requests), f"{k.sectors_per_load:.1f}",
                          str(k.global_store_requests), f"{k.sectors_per_store:.1f}", f"{k.global_bytes:,}", share,
                          str(k.shared_requests), f"{k.wavefronts_per_request:.2f}" if k.shared_requests else "")
    console.print(table)
    console.print("sectors per request: 4 is a coalesced float32 warp, 32 one sector per lane; wavefronts per "
                  "request: 1 is conflict-free, 32 every lane in one bank")


def cmd_bench(args) -> int:
    info = _day(args.day)
    if args.traffic_only:
        _print_traffic(info, days.load_solution(info.number), _module(info, args.exercise))
        return 0
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
        if course.DEVICE.kind == "sim":
            _print_traffic(info, sol, module)
        return 0
    if args.traffic:  # counted in the simulator, in a process of its own (the choice is made at import)
        cmd = [sys.executable, "-m", "course", "bench", str(info.number), "--traffic-only"]
        env = dict(os.environ, COURSE_DEVICE="sim")
        code = subprocess.run(cmd + (["--exercise"] if args.exercise else []), env=env, cwd=days.ROOT).returncode
        if code:
            return code
    from rich.progress import Progress

    from course import bench

    n = _parse_n(args.n) if args.n else None
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("benchmark", total=None)
        result = bench.run(info.number, n, repeats=args.repeats, target=_module(info, args.exercise),
                           progress=lambda msg: progress.update(task, description=msg))
    console.print(_bench_table(result))
    for name, why in result.skipped.items():
        console.print(f"[yellow]{name} row skipped[/]: {escape(why)}")
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
    c.add_argument("--version", help="grade one version alone (e.g. naive)")
    c.add_argument("--target", metavar="FILE", help="grade this file in place of days/dayNN_*/exercise.py")
    c.set_defaults(fn=cmd_check)
    b = sub.add_parser("bench", help="naive vs optimized")
    b.add_argument("day")
    b.add_argument("--n", help="problem size (e.g. 67108864 or 4096x4096); default: the day's BENCH_SIZES[0]")
    b.add_argument("--repeats", type=int, default=30)
    b.add_argument("--plot", metavar="PNG")
    b.add_argument("--json", metavar="FILE")
    b.add_argument("--exercise", action="store_true", help="time (or, without a GPU, inspect) your exercise")
    b.add_argument("--traffic", action="store_true",
                   help="on a GPU, also count requests and sectors in the simulator (always shown without one)")
    b.add_argument("--traffic-only", action="store_true", help=argparse.SUPPRESS)
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
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["run"]:  # every option after `run` is the engine's (argparse would claim --help)
        rest = argv[1:][1:] if argv[1:2] == ["--"] else argv[1:]
        args = argparse.Namespace(command="run", rest=rest, fn=cmd_run)
    else:
        args = build_parser().parse_args(argv)
    if args.command in ("check", "bench", "inspect") and not args.day:
        return _fail(f"say which day: make {args.command} DAY=N (days: "
                     f"{', '.join(str(d.number) for d in days.all_days())})")
    if args.command != "exercises":
        _banner()
    return args.fn(args)
