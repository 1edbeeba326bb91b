"""Day 42, deliberately wrong: day42_matmul_1d_blocking.py with one classic mistake.

MISTAKE: the loads guarded but the edge tiles not zero-filled: past K (and past M, N) both tiles keep
         the previous k step's values (or whatever shared memory held), and the unguarded inner loop
         adds their products in. (Zeroing either tile alone is enough past K, since 0 x anything
         finite is 0; zeroing neither is not.)

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day42_matmul_1d_blocking"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        else:\n            a_tile[a_row, a_k] = float32(0.0)  # past M or K: a zero that adds nothing\n',
        '        # MISTAKE: no zero fill past M or K\n',
    ),
    (
        '        else:\n            b_tile[b_k, b_col] = float32(0.0)  # past K or N\n',
        '        # MISTAKE: no zero fill past K or N\n',
    ),
]
