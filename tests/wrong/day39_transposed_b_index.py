"""Day 39, deliberately wrong: day39_matmul_naive.py with one classic mistake.

MISTAKE: B indexed as if it were stored transposed, b[j, k] instead of b[k, j]: on a square matrix
         every index is in bounds and the result is A B^T; on any other shape it reads past B.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day39_matmul_naive"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '                acc += a[i, k] * b[k, j]\n',
        '                acc += a[i, k] * b[j, k]  # MISTAKE: B read as (N, K)\n',
    ),
]
