"""Day 46, deliberately wrong: day46_matmul_warp_tiling.py with one classic mistake.

MISTAKE: the A fragment of the warp's second sub-tile read TM = 4 rows on instead of WSUBM = 32 (the
         sub-tiles taken as adjacent blocks of the thread's tile, day 43's layout): every index stays
         inside the tile, nothing faults, but rows 4-7 of a lane's outputs are computed from the rows
         of its neighbour lane and stored 32 rows down. Right only where M <= 4.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day46_matmul_warp_tiling"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '                        a_tile, a_row + wm * WSUBM + v * VEC)\n',
        '                        a_tile, a_row + wm * TM + v * VEC)  # MISTAKE: the thread tile\'s stride\n',
    ),
]
