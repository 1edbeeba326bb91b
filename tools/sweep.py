"""Time a day's optimized version over values of its module-level constants, on a GPU.

    python tools/sweep.py 10 Z_CHUNK=16,32,64,128
    python tools/sweep.py 9 ROWS_PER_THREAD=8,16,32 --out results/h200/sweeps/day09.json
    python tools/sweep.py 81 --n "(64, 32, 8, 128, 16, 4096, 'float16', False, 2048)"   # no knob: one size

Every combination is a fresh copy of the solution with those constants rewritten
(course.days.with_constants), timed by course.bench like `make bench` and re-checked against the
reference at the day's benchmark size. Prints one line per combination, then the fastest. Each
value is read as a Python literal (2, 0.5, (32, 8)); a name must be assigned exactly once at the
start of a line of the solution.
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import sys
from pathlib import Path

import course
from course import bench, days


def parse_knob(text: str) -> tuple[str, list]:
    name, sep, values = text.partition("=")
    if not sep or not name.isidentifier() or not values:
        raise argparse.ArgumentTypeError(f"expected NAME=v1,v2,..., got {text!r}")
    try:
        parsed = ast.literal_eval(f"[{values}]")
    except (SyntaxError, ValueError):
        raise argparse.ArgumentTypeError(f"{name}: values must be Python literals, got {values!r}") from None
    return name, parsed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("day", type=int)
    parser.add_argument("knobs", nargs="*", type=parse_knob, metavar="NAME=v1,v2")
    parser.add_argument("--version", default="optimized")
    parser.add_argument("--n", type=ast.literal_eval, help="the size, as a Python literal (default: BENCH_SIZES[0])")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--out", type=Path, help="also write every row as JSON here")
    args = parser.parse_args(argv)
    if not course.ON_GPU:
        print("sweep needs a CUDA GPU; without one, `make inspect` shows registers and instructions")
        return 2
    names = [name for name, _ in args.knobs]
    rows, failed = [], 0
    for combo in itertools.product(*(values for _, values in args.knobs)):
        setting = dict(zip(names, combo))
        label = " ".join(f"{k}={v!r}" for k, v in setting.items()) or "as written"
        try:
            variant = days.with_constants(args.day, **setting) if setting else days.load_solution(args.day)
            result = bench.run(args.day, args.n, versions=[args.version], with_library=False,
                               repeats=args.repeats, target=variant)
        except Exception as exc:  # a setting the kernel cannot take (too many registers, a bad shape)
            failed += 1
            print(f"{label:40s} FAILED: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}", flush=True)
            continue
        row = result.rows[0]
        ok = row.checked == "ok"
        print(f"{label:40s} {row.ms * 1e3:9.1f} us  {row.pct_peak:5.1f} % of {result.peak_name}"
              + ("" if ok else "  WRONG"), flush=True)
        rows.append({**setting, "ms": row.ms, "pct_peak": row.pct_peak, "peak": result.peak_value,
                     "checked": row.checked})
    good = [r for r in rows if r["checked"] == "ok"]
    if good:
        best = min(good, key=lambda r: r["ms"])
        print("fastest: " + " ".join(f"{k}={best[k]!r}" for k in names)
              + f"  {best['ms'] * 1e3:.1f} us, {best['pct_peak']:.1f} %")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"day": args.day, "version": args.version, "rows": rows}, indent=2,
                                       default=str))
    return 1 if failed or len(good) < len(rows) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
