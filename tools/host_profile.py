"""Where one version's host function spends its time: many calls under cProfile, the costliest functions.

    python3 tools/host_profile.py 31 direct                 # day 31's v5 at its benchmark size
    python3 tools/host_profile.py 31 direct --n 4097 --calls 200 --out day31.prof

A version timed by the wall clock (``clock: wall`` in `make bench`: it reads a count back, or plans on the
host) pays for everything its Python does before the GPU starts and after it ends. Timing its kernels
alone (CUDA events around the launches) against the whole call says how much that is; this says where
it goes. The inputs are put on the device first, as `make bench` does, and a few untimed calls compile
everything; then the calls run under cProfile, the device synchronised after each (what the wall clock
of `make bench` sees). Prints the wall time per call with and without the profiler, then the top
functions by their own time and by cumulative time. In the simulator it runs too, but there the
kernels dominate and say nothing of a GPU's host costs.
"""

from __future__ import annotations

import argparse
import cProfile
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import course  # noqa: E402  (first: GPU or simulator before numba loads)
from course import cuda, days, launch  # noqa: E402
from course.profiling import print_top  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("day", type=int)
    p.add_argument("version")
    p.add_argument("--n", help="the size, as a Python literal (default: the day's first BENCH_SIZES entry)")
    p.add_argument("--calls", type=int, default=100, help="profiled calls (default %(default)s)")
    p.add_argument("--top", type=int, default=25, help="rows of each table (default %(default)s)")
    p.add_argument("--out", type=Path, help="also write the whole profile here (python -m pstats FILE)")
    a = p.parse_args(argv)
    if a.calls < 1 or a.top < 1:
        print("host_profile: --calls and --top must be >= 1", file=sys.stderr)
        return 2
    try:
        sol = days.load_solution(a.day)
    except (LookupError, ValueError) as exc:
        print(f"host_profile: {exc}", file=sys.stderr)
        return 2
    fn = getattr(sol, a.version, None)
    if not callable(fn):
        print(f"host_profile: day {a.day} has no version {a.version!r} (it has {', '.join(sol.VERSIONS)})",
              file=sys.stderr)
        return 2
    import ast

    n = ast.literal_eval(a.n) if a.n else sol.BENCH_SIZES[0]
    inputs = sol.make_inputs(n, seed=1234)
    dev = tuple(launch.to_device(x)[0] if isinstance(x, np.ndarray) else x for x in inputs)

    def call():
        fn(*dev)
        if course.ON_GPU:
            cuda.synchronize()

    with launch.no_poison():
        for _ in range(3):  # compiles, pools grow
            call()
        t = time.perf_counter()
        for _ in range(a.calls):
            call()
        plain = (time.perf_counter() - t) / a.calls
        prof = cProfile.Profile()
        t = time.perf_counter()
        prof.enable()
        for _ in range(a.calls):
            call()
        prof.disable()
        profiled = (time.perf_counter() - t) / a.calls
    print(f"day {a.day} {a.version} at n = {n!r} on {course.DEVICE.describe()}: {plain * 1e6:,.1f} us a call "
          f"(device synchronised after each), {profiled * 1e6:,.1f} us under the profiler; {a.calls} calls")
    print_top(prof, a.top, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
