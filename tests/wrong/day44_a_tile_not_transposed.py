"""Day 44, deliberately wrong: day44_matmul_vectorized.py with one classic mistake.

MISTAKE: the A tile stored the way it was loaded, row-major (a_tile[a_row * BK + a_k + j], day 43's
         layout), while the fragment reads still take it as transposed (a_tile[kk * BM + row]): every
         index is in bounds of the 1024-float tile and nothing faults or races, but a_frag holds
         the wrong elements of A (a 1 x 1 x 1 product passes: only element 0 lands where it is read).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day44_matmul_vectorized"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        a_tile[a_k * BM + a_row] = x0\n'
        '        a_tile[(a_k + 1) * BM + a_row] = x1\n'
        '        a_tile[(a_k + 2) * BM + a_row] = x2\n'
        '        a_tile[(a_k + 3) * BM + a_row] = x3\n',
        '        a_tile[a_row * BK + a_k] = x0  # MISTAKE: row-major, the reads expect (BK, BM)\n'
        '        a_tile[a_row * BK + a_k + 1] = x1\n'
        '        a_tile[a_row * BK + a_k + 2] = x2\n'
        '        a_tile[a_row * BK + a_k + 3] = x3\n',
    ),
]
