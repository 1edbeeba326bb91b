"""Day 13, deliberately wrong: day13_thread_coarsening.py with one classic mistake.

MISTAKE: the coarsened kernel stores all COARSEN outputs without checking r0 + i < rows, so the last tile writes past
         the bottom of the image whenever rows is not a multiple of COARSEN.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day13_thread_coarsening"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        ('            if r0 + i < rows:  # the last tile may hang past the bottom: loads were clamped, stores guarded\n'
         '                out[r0 + i, c] = acc\n'),
        '            out[r0 + i, c] = acc\n',
    ),
]
