"""Day 10, deliberately wrong: day10_stencil3d_register_tiling.py with one classic mistake.

MISTAKE: in the tall march a thread's rows take their lower y neighbour from the thread's own next row for every
         row, the last one included: the last row reads a queue slot of a row the thread does not have instead
         of the plane's next row (the one another thread stored).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day10_stencil3d_register_tiling"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        down = q[r + 1, 1] if r < ROWS - 1 else south\n',
        '        down = q[(r + 1) % ROWS, 1]  # MISTAKE: the last row wraps to the first instead of the plane\n',
    ),
]
