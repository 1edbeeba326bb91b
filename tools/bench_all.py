"""Benchmark every day (or the ones named) on a GPU and save each result as JSON.

    python tools/bench_all.py results/h200 [6 7 8 ...] [--jobs 8] [--day-limit 60] [--compile-ahead]

Prints one fixed-format line per day as it goes; the README's results table is built from the JSON
files by tools/readme_tables.py.

The GPU times one day at a time. What needs only the host runs ahead: ``--jobs`` worker processes
(course.prepare) make the next days' inputs and references while the GPU times the current day, up to
3 x jobs days ahead, so a day's turn starts with its inputs ready (an attention day's float64
reference takes minutes: it has to start a dozen days early). The re-check after timing compares on the GPU
(course.checking). A day whose timing runs past ``--day-limit`` seconds is stopped, reported as TIMEOUT
with the step it was in, and the next day starts: one slow day cannot take a visit's ten minutes.
With ``--compile-ahead`` the workers also compile each day's kernels into a disk cache that the timing
process loads them from (course.jit_cache): on an H100 the compiles were 220 s of a 754-s run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

import course
from course import bench, days, jit_cache, prepare


class DayTimeout(Exception):
    """A day ran past its limit."""


@contextlib.contextmanager
def limit(seconds: float):
    """Raise DayTimeout in the main thread after ``seconds`` (0: no limit). A CUDA call in progress
    finishes first: Python runs the handler when control comes back to it."""
    if seconds <= 0:
        yield
        return

    def expire(signum, frame):
        raise DayTimeout(f"over its {seconds:.0f} s limit")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def scratch_root() -> str | None:
    """Where the workers' pickles wait for their turn: /dev/shm (memory, no disk in the way) when it has
    room for several days' inputs (32 GB), else the default temporary folder (a container's /dev/shm is
    often 64 MB)."""
    try:
        st = os.statvfs("/dev/shm")
    except OSError:
        return None
    return "/dev/shm" if st.f_bavail * st.f_frsize >= 32 << 30 else None


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench_all", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder for one JSON per day")
    parser.add_argument("days", nargs="*", type=int, help="days to time (default: every day)")
    # 8 on the GPU machine's 16 cores: with 6, two of them on the early attention references for their
    # first 200 s, the first days' inputs made the GPU wait (days 09, 10 and 16 of one visit: 51 s).
    parser.add_argument("--jobs", type=int, default=max(1, min(8, (os.cpu_count() or 2) - 2)),
                        help="worker processes making inputs and references ahead (default: %(default)s)")
    parser.add_argument("--day-limit", type=float, default=60.0,
                        help="seconds a day's timing may take, once its inputs are ready; 0: no limit")
    parser.add_argument("--compile-ahead", action="store_true",
                        help="the workers also compile each day's KERNELS into a disk cache the timing process "
                             "loads them from (course.jit_cache): the compiles leave the GPU's time")
    return parser.parse_args(argv)


def main(argv: list[str], runner=None) -> int:
    """``runner(day, prepared=..., progress=..., quiet=...)`` times a day (default: bench.run_sizes, on a
    GPU); ``quiet`` stops the workers around wall-clock samples (course.prepare.Ahead.paused)."""
    args = parse(argv)
    if runner is None:
        if not course.ON_GPU:
            print("bench_all needs a CUDA GPU")
            return 2
        runner = bench.run_sizes
    unknown = set(args.days) - {info.number for info in days.all_days()}
    if unknown:  # a typo would otherwise bench nothing for it, silently
        print(f"bench_all: no such day(s): {sorted(unknown)}")
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    chosen = [info for info in days.all_days() if not args.days or info.number in args.days]
    args.totals = dict.fromkeys(("waiting", "warm", "timed", "check"), 0.0)  # where the visit's seconds went
    failed = 0
    begun = time.perf_counter()
    # `timeout` ends a visit's run with SIGTERM: exit through the finally below, so no worker outlives it.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    with tempfile.TemporaryDirectory(prefix="bench_inputs_", dir=scratch_root()) as scratch:
        if args.compile_ahead:  # the workers inherit it with the environment; a fresh cache for the run
            os.environ[jit_cache.ENV] = str(Path(scratch) / "numba-cache")
            print(f"bench_all: compiling ahead into {os.environ[jit_cache.ENV]} "
                  f"({jit_cache.enable()} kernels of the modules loaded so far cached on disk)", flush=True)
        ahead = prepare.Ahead(chosen, Path(scratch), args.jobs)
        try:
            for info in chosen:
                failed += not run_day(info, ahead, runner, args)
        finally:
            ahead.close()
    print(f"bench_all: {len(chosen)} days in {time.perf_counter() - begun:.0f} s, {failed} failed "
          f"({args.jobs} workers ahead, {args.day_limit:.0f} s a day); of it, "
          + ", ".join(f"{k} {v:.0f} s" for k, v in args.totals.items())
          + " (warm: the warm-up calls, compiling included; the rest: the copy rate and the host)", flush=True)
    return 1 if failed else 0


def run_day(info, ahead: prepare.Ahead, runner, args) -> bool:
    start = time.perf_counter()
    step = ["waiting for its inputs"]

    def progress(msg, day=info.number):  # where a slow day's time goes, as it goes
        step[0] = msg
        ahead.refill()  # a worker that finished while this day is timed: its place goes to the next day
        print(f"  day {day:02d} +{time.perf_counter() - start:5.1f} s  {msg}", flush=True)

    try:
        # The wait for the inputs is not the day's: a worker still on a float64 reference (minutes for an
        # attention day) holds up the GPU, but the workers behind it go on making the next days'.
        prepared = ahead.get(info, heartbeat=lambda s: progress(f"still waiting for its inputs ({s:.0f} s)"))
        if info.slug in ahead.notes:
            progress(f"inputs made here: {ahead.notes[info.slug]}")
        else:
            made = ahead.seconds.get(info.slug)
            progress(f"inputs ready (waited {ahead.waited_s:.1f} s"
                     + ("" if made is None else f"; its worker took {made:.1f} s") + ")")
        args.totals["waiting"] += ahead.waited_s
        start = time.perf_counter()
        compiled = jit_cache.compiled_here()  # empty unless compiling ahead (the course's dispatchers seen)
        with limit(args.day_limit):
            result = runner(info.number, prepared=prepared, progress=progress, quiet=ahead.paused)
        missed = jit_cache.compiled_here() - compiled
        if missed:  # kernels the workers did not compile ahead, or compiled under another key
            progress("compiled while timed (not on disk): " + ", ".join(f"{k} x{v}" for k, v in missed.items()))
    except DayTimeout as exc:
        print(f"day {info.number:02d} TIMEOUT {exc}, while: {step[0]}", flush=True)
        settle()
        return False
    except Exception:
        print(f"day {info.number:02d} FAILED\n{traceback.format_exc()}", flush=True)
        settle()
        return False
    finally:
        ahead.done(info)
    bench.save_json(result, args.out / f"{info.slug}.json")
    for row in result.rows:
        for k, v in row.seconds.items():
            args.totals[k] += v
    rows = "  ".join(f"{r.version}={r.ms * 1e3:.1f}us/{r.pct_peak:.0f}%/{r.speedup:.2f}x"
                     + ("" if r.checked == "ok" else "/WRONG") for r in result.rows)
    # The finishing time: gpu_check.sh logs the SM clock alongside, to match a slow row to its clock.
    print(f"day {info.number:02d} peak={result.peak_value:.0f}  {rows}  at {time.strftime('%H:%M:%S')} "
          f"({time.perf_counter() - start:.0f} s, {ahead.waited_s:.0f} s waiting for its inputs before)", flush=True)
    return all(r.checked == "ok" for r in result.rows)


def settle() -> None:
    """After a day stopped part-way: let the GPU finish what it was given before the next day's timing."""
    if course.ON_GPU:
        with contextlib.suppress(Exception):
            course.cuda.synchronize()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
