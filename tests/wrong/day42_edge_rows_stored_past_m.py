"""Day 42, deliberately wrong: day42_matmul_1d_blocking.py with one classic mistake.

MISTAKE: the column guarded but not each of the thread's 8 rows: in the last tile row of C the
         accumulator's rows past M (sums of the zero-filled A rows, so 0.0) are stored anyway, past the
         end of C (on the GPU into the next matrix, or a fault; the simulator names the index).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day42_matmul_1d_blocking"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '            if i < m:  # the last tile\'s rows past M: the accumulator holds zeros there, not outputs\n'
        '                c[i, j] = acc[r]  # a warp writes 32 consecutive floats of row i: 4 sectors\n',
        '            c[i, j] = acc[r]  # MISTAKE: no row guard\n',
    ),
]
