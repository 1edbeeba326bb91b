"""Day 03, deliberately wrong: day03_transfers.py with one classic mistake.

MISTAKE: the optimized loop launches every step on the uploaded input y instead of the running result, so each step
         starts again from the original y and only the last update survives.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day03_transfers"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '            saxpy_kernel[blocks, THREADS](a, d_x, out, out)  # elementwise: reading and writing out is safe\n',
        '            saxpy_kernel[blocks, THREADS](a, d_x, d_y, out)\n',
    ),
]
