"""Day 20, deliberately wrong: day20_transpose.py with one classic mistake.

MISTAKE: the tile read back by rows (tile[ty + 8k, tx]) instead of by columns: the bank conflict is gone and so is
         the transpose inside the tile: each tile lands in the right place of out, untransposed.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day20_transpose"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        'out[dst_r + uint64(k * BLOCK_ROWS), dst_c] = tile[ux, uy + uint64(k * BLOCK_ROWS)]\n',
        'out[dst_r + uint64(k * BLOCK_ROWS), dst_c] = tile[uy + uint64(k * BLOCK_ROWS), ux]  # MISTAKE\n',
    ),
    (
        '                out[orow, oc] = tile[tx, ty + k * BLOCK_ROWS]\n',
        '                out[orow, oc] = tile[ty + k * BLOCK_ROWS, tx]  # MISTAKE: read by rows\n',
    ),
]
