"""Day 20, deliberately wrong: day20_transpose.py with one classic mistake.

MISTAKE: a tile index not swapped: the transposed tile is written back at tile (tr, tc) of out, where it sat in x,
         instead of at (tc, tr). Right for the diagonal tiles only (and out of bounds on a non-square matrix).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day20_transpose"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        dst_r = uint64(c0) + uy  # rows of out are columns of x\n'
        '        dst_c = uint64(r0) + ux\n',
        '        dst_r = uint64(r0) + uy  # MISTAKE: the tile position kept, not swapped\n'
        '        dst_c = uint64(c0) + ux\n',
    ),
    (
        '        oc = r0 + tx\n',
        '        oc = c0 + tx  # MISTAKE: the tile position kept, not swapped\n',
    ),
    (
        '            orow = c0 + ty + k * BLOCK_ROWS\n',
        '            orow = r0 + ty + k * BLOCK_ROWS\n',
    ),
]
