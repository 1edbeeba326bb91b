"""Day 02, written another way: day02_grids_2d.py with a different correct kernel.

RIGHT: the optimized row loop takes two rows a trip instead of four: fewer loads in flight, still coalesced, still
       correct, so the grader must pass it (it asserts loads side by side, not how many).

The grader run against it must pass (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day02_grids_2d"
EDITS = [  # (text in the solution, what the other way puts there)
    (
        ('        while r + 3 * step_r < rows:\n'
         '            x0 = x[r, c]\n'
         '            x1 = x[r + step_r, c]\n'
         '            x2 = x[r + 2 * step_r, c]\n'
         '            x3 = x[r + 3 * step_r, c]\n'
         '            out[r, c] = x0 + b\n'
         '            out[r + step_r, c] = x1 + b\n'
         '            out[r + 2 * step_r, c] = x2 + b\n'
         '            out[r + 3 * step_r, c] = x3 + b\n'
         '            r += 4 * step_r\n'),
        ('        while r + step_r < rows:\n'
         '            x0 = x[r, c]\n'
         '            x1 = x[r + step_r, c]\n'
         '            out[r, c] = x0 + b\n'
         '            out[r + step_r, c] = x1 + b\n'
         '            r += 2 * step_r\n'),
    ),
]
