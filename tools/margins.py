"""How close each check comes to its tolerance, over runs under many seeds.

    COURSE_MARGIN_LOG=out/margins.tsv COURSE_SEED=1 python -m pytest -q -n 2 tests/...
    COURSE_MARGIN_LOG=out/margins.tsv COURSE_SEED=2 python -m pytest ...
    python tools/margins.py out/margins.tsv [--top 30] [--over 0.5]

course.checking appends one line per toleranced comparison (test, output name, max relative error,
tolerance). This prints, per test, the largest share of its tolerance any comparison used and how many
comparisons it logged (a test may compare several outputs a run); a test near 1 fails in some run of
CI's fresh seeds.
"""

from __future__ import annotations

import argparse
import collections


def load(paths, only: str = ""):
    worst = collections.defaultdict(lambda: [0.0, 0, ""])
    for path in paths:
        with open(path) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) != 4:
                    continue
                test, name, err, rtol = parts
                if only not in test:
                    continue
                share = float(err) / float(rtol)
                w = worst[test]
                w[1] += 1
                if share > w[0] or not w[2]:
                    w[0], w[2] = share, name
    return worst


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--top", type=int, default=30, help="how many tests to list (default 30)")
    ap.add_argument("--only", default="tests/test_day",
                    help="tests whose id holds this (default: the days' graders; the course's own tests "
                         "fail comparisons on purpose)")
    ap.add_argument("--over", type=float, default=0.0, help="list only tests above this share")
    args = ap.parse_args(argv)
    worst = load(args.logs, args.only)
    rows = sorted(worst.items(), key=lambda kv: -kv[1][0])
    rows = [r for r in rows if r[1][0] > args.over][: args.top]
    print(f"{len(worst)} tests logged; the {len(rows)} closest to their tolerance:")
    for test, (share, count, name) in rows:
        print(f"{share:6.3f}  {count:4d}  {test}  [{name}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
