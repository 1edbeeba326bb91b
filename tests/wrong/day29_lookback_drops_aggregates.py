"""Day 29, deliberately wrong: day29_scan_decoupled_lookback.py with one classic mistake.

MISTAKE: the look-back reads a window of aggregates (flag A) but moves 32 tiles back without adding them: only the
         round that meets a P counts. In the simulator blocks run one after another, so a predecessor is always P
         there; the grader's hand-made status words (aggregates before the nearest P) show the lost sums.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day29_scan_decoupled_lookback"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "        exclusive += warp_total(value)\n        if p != 0:\n            return exclusive\n",
        "        if p != 0:  # MISTAKE: an all-A window is read but not added\n"
        "            return exclusive + warp_total(value)\n",
    ),
]
