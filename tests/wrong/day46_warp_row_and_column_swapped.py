"""Day 46, deliberately wrong: day46_matmul_warp_tiling.py with one classic mistake.

MISTAKE: the warp's row and column in the block tile swapped: warp_col = warp // WARPS_N and warp_row
         the remainder. The 8 warps are laid out 2 down x 4 across (warp tiles of 64 x 32); swapped,
         warp_row runs 0..3 and the warps reach rows 64 x 3 = 192 of a 128-row tile (reading past the
         A copy, into the other copy that is being stored: the simulator reports that as a race; and
         writing into the next tile of C) while columns 64-127 of the tile get no warp at all. Only a
         square warp grid would hide it.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day46_matmul_warp_tiling"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '    warp_row = warp // WARPS_N\n    warp_col = warp - warp_row * WARPS_N\n',
        '    warp_col = warp // WARPS_N  # MISTAKE: row and column swapped\n'
        '    warp_row = warp - warp_col * WARPS_N\n',
    ),
]
