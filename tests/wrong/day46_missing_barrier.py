"""Day 46, deliberately wrong: day46_matmul_warp_tiling.py with one classic mistake.

MISTAKE: no barrier at the end of a k step. Double buffering leaves ONE barrier a step, and it is
         needed twice over: a fast warp would read the next copy before the slow warps have stored it,
         and store the step after into the copy slower warps are still reading (the simulator names
         the race). Right whenever K <= 16 (one step, only the prologue's barrier).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day46_matmul_warp_tiling"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        cuda.syncthreads()  # the only barrier of a step: the next copy is stored, this one is free again\n',
        '        # MISTAKE: no cuda.syncthreads() here\n',
    ),
]
