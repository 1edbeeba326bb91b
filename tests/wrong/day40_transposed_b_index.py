"""Day 40, deliberately wrong: day40_matmul_coalesced.py with one classic mistake.

MISTAKE: B indexed as b[j, k]: with x along the columns it even looks coalesced along k, and on a square
         matrix every index is in bounds; it computes A B^T (and reads past B on any other shape).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day40_matmul_coalesced"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '                acc += a[i, k] * b[k, j]\n',
        '                acc += a[i, k] * b[j, k]  # MISTAKE: B read as (N, K)\n',
    ),
]
