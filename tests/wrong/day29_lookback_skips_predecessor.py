"""Day 29, deliberately wrong: day29_scan_decoupled_lookback.py with one classic mistake.

MISTAKE: the look-back's first window ends one tile early (at tile - 2): the nearest predecessor's aggregate is never
         added, so every tile after the first misses one tile's sum.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day29_scan_decoupled_lookback"
EDITS = [  # (text in the solution, what the mistake puts there)
    ("    end = tile\n", "    end = tile - 1  # MISTAKE: the window starts one tile too far back\n"),
]
