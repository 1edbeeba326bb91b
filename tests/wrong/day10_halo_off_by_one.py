"""Day 10, deliberately wrong: day10_stencil3d_register_tiling.py with one classic mistake.

MISTAKE: warp 0 loads the halo row from y0 instead of y0 - 1, so the tile's first row sees itself as its upper
         neighbour.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day10_stencil3d_register_tiling"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '    hy, hx, sy, sx = y0 - 1, x, 0, tx + 1  # warp 0: the row above\n',
        '    hy, hx, sy, sx = y0, x, 0, tx + 1  # MISTAKE: halo off by one\n',
    ),
]
