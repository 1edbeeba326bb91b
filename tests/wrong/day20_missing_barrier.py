"""Day 20, deliberately wrong: day20_transpose.py with one classic mistake.

MISTAKE: no barrier between loading the tile and reading its columns: thread (tx, ty) reads values that 31 other
         threads, in other warps, may not have stored yet (the simulator names the race).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day20_transpose"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '    cuda.syncthreads()  # thread (tx, ty) reads tile column tx, loaded by 32 different threads\n',
        '    # MISTAKE: no cuda.syncthreads() here\n',
    ),
]
