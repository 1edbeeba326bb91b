"""Day 29, deliberately wrong: day29_scan_decoupled_lookback.py with one classic mistake.

MISTAKE: the look-back reads the status words with a plain load: the compiler may keep the first value in a
         register (a spin that never ends) or the L1 may serve a stale line. The simulator gives right answers;
         the grader finds no relaxed or atomic 64-bit read in the PTX.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day29_scan_decoupled_lookback"
EDITS = [  # (text in the solution, what the mistake puts there)
    ("    if RELAXED_POLL:\n        return flags.load_relaxed(status, j)\n    return cuda.atomic.add(status, j, uint64(0))\n",
     "    return status[j]  # MISTAKE: a plain load\n"),
]
