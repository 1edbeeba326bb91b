"""Day 10, written another correct way: day10_stencil3d_register_tiling.py with smaller blocks.

RIGHT: (16, 8) blocks instead of (32, 16): a (10, 18) shared plane a block, each row of 16 threads half a warp; the
       same halo duties by row (still 2 * BLOCK[1] == BLOCK[0]), register queue and double-buffered plane.

The grader run against it must pass every test (.ci/prove_graders.py checks): it asserts the day's idea
(a shared plane, a barrier, no local memory), not the solution's block shape.
"""

SOLUTION = "day10_stencil3d_register_tiling"
EDITS = [  # (text in the solution, what this version puts there)
    (
        'BLOCK = (32, 16)  # optimized (x, y); 2 * BLOCK[1] == BLOCK[0], so one warp loads both side columns\n',
        'BLOCK = (16, 8)  # optimized (x, y); 2 * BLOCK[1] == BLOCK[0], so one row of threads loads both side columns\n',
    ),
]
