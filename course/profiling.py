"""The top of a cProfile, as the course's profiling tools print it (tools/engine_profile.py,
tools/host_profile.py): the functions that cost most by their own time and by cumulative time, and
the whole profile written to a file for `python -m pstats FILE` or snakeviz."""

from __future__ import annotations

import io
import pstats


def print_top(prof, top: int, out=None) -> None:
    """Print the ``top`` functions of ``prof`` (a cProfile.Profile) by own and by cumulative time; with
    ``out`` (a path), write the whole profile there too."""
    for key, title in (("tottime", "own time"), ("cumulative", "cumulative time")):
        text = io.StringIO()
        pstats.Stats(prof, stream=text).strip_dirs().sort_stats(key).print_stats(top)
        body = text.getvalue()
        start = body.find("   ncalls")
        print(f"\n--- the top {top} functions by {title} ---")
        print(body[start:].rstrip() if start >= 0 else body.rstrip())
    if out:
        prof.dump_stats(str(out))
        print(f"\nwrote {out}")
