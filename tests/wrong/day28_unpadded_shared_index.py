"""Day 28, deliberately wrong: day28_scan_brent_kung.py with one classic mistake.

MISTAKE: the shared index is not padded (element i in word i): at stride s the lanes of a warp are 2s words apart,
         so 32 lanes meet in 32 / min(2s, 32) banks and each request serialises (right answers, bank conflicts back).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day28_scan_brent_kung"
EDITS = [  # (text in the solution, what the mistake puts there)
    ("    return i + (i >> 5)\n", "    return i  # MISTAKE: no padding\n"),
]
