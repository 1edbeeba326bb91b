"""Day 07, deliberately wrong: day07_constant_mask.py with one classic mistake.

MISTAKE: halo off by one: the naive kernel's guard is 0 < k, so the tap that reads x[0] is dropped and the first
         MASK_RADIUS + 1 outputs come out wrong.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day07_constant_mask"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '            if 0 <= k < n:\n',
        '            if 0 < k < n:  # MISTAKE: drops x[0]\n',
    ),
]
