"""Day 41, deliberately wrong: day41_matmul_shared_tiles.py with one classic mistake.

MISTAKE: no barrier after the 32 multiply-adds: a fast warp stores the next k step's tiles while slower
         warps are still reading this step's (the simulator names the race); right whenever K <= 32.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day41_matmul_shared_tiles"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        cuda.syncthreads()  # the next k step overwrites tiles that slower warps are still reading\n',
        '        # MISTAKE: no cuda.syncthreads() here\n',
    ),
]
