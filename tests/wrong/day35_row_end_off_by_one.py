"""Day 35, deliberately wrong: day35_spmv_csr.py with one classic mistake.

MISTAKE: the scalar kernel's loop stops at indptr[row + 1] - 1 (as if the end offset were inclusive), so every row
         loses its last nonzero and a one-element row comes out 0.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day35_spmv_csr"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        for j in range(indptr[row], indptr[row + 1]):\n',
        '        for j in range(indptr[row], indptr[row + 1] - 1):\n',
    ),
]
