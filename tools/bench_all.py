"""Benchmark every day (or the ones named) on a GPU and save each result as JSON.

    python tools/bench_all.py results/h200 [6 7 8 ...]

Prints one fixed-format line per day as it goes; the README's results table is built from the JSON
files by tools/readme_tables.py.
"""

from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path

import course
from course import bench, days


def main(argv: list[str]) -> int:
    if not course.ON_GPU:
        print("bench_all needs a CUDA GPU")
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    wanted = {int(a) for a in argv[1:]}
    unknown = wanted - {info.number for info in days.all_days()}
    if unknown:  # a typo would otherwise bench nothing for it, silently
        print(f"bench_all: no such day(s): {sorted(unknown)}")
        return 2
    failed = 0
    for info in days.all_days():
        if wanted and info.number not in wanted:
            continue
        start = time.perf_counter()

        def progress(msg, day=info.number, start=start):  # where a slow day's time goes, as it goes
            print(f"  day {day:02d} +{time.perf_counter() - start:5.1f} s  {msg}", flush=True)

        try:
            result = bench.run_sizes(info.number, progress=progress)  # every BENCH_SIZES entry
        except Exception:
            failed += 1
            print(f"day {info.number:02d} FAILED\n{traceback.format_exc()}", flush=True)
            continue
        bench.save_json(result, out / f"{info.slug}.json")
        rows = "  ".join(f"{r.version}={r.ms * 1e3:.1f}us/{r.pct_peak:.0f}%/{r.speedup:.2f}x"
                         + ("" if r.checked == "ok" else "/WRONG") for r in result.rows)
        # The finishing time: gpu_check.sh logs the SM clock alongside, to match a slow row to its clock.
        print(f"day {info.number:02d} peak={result.peak_value:.0f}  {rows}  at {time.strftime('%H:%M:%S')} "
              f"({time.perf_counter() - start:.0f} s)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
