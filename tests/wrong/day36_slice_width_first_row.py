"""Day 36, deliberately wrong: day36_spmv_ell_sell.py with one classic mistake.

MISTAKE: each slice is padded to its first row's length instead of its longest row's: the rows are
         sorted ascending within a window, so the first row is the shortest and the others are cut short.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day36_spmv_ell_sell"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        for i in range(s * C, min(s * C + C, rows)):\n',
        '        for i in range(s * C, min(s * C + 1, rows)):  # the first row only\n',
    ),
]
