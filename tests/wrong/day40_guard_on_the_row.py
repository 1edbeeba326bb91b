"""Day 40, deliberately wrong: day40_matmul_coalesced.py with one classic mistake.

MISTAKE: the indices swapped but day 39's guard kept: the kernel guards the row (i < M) instead of the
         column it now owns along x (j < N), so on a matrix wider than it is tall nothing stops the
         threads past the last column: they read past B and write past C.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day40_matmul_coalesced"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '    if j < n:\n        while i < m:\n',
        '    if i < m:  # MISTAKE: day 39\'s guard, on the wrong index\n        while i < m:\n',
    ),
]
