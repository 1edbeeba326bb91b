"""Day 43, deliberately wrong: day43_matmul_2d_blocking.py with one classic mistake.

MISTAKE: the B fragment indexed with the thread's row ty instead of its column tx (a transposition
         mix-up): the 128 x 128 tile is square and ty, tx both run 0..15, so every index is in bounds
         and nothing faults; the thread multiplies its rows of A by the wrong columns of B, right only
         on the tile's diagonal threads (a 1 x 1 product passes).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day43_matmul_2d_blocking"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '                b_frag[j] = b_tile[kk * BN + tx + j * THREAD_COLS]\n',
        '                b_frag[j] = b_tile[kk * BN + ty + j * THREAD_COLS]  # MISTAKE: the row index\n',
    ),
]
