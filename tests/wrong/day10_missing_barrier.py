"""Day 10, deliberately wrong: day10_stencil3d_register_tiling.py with one classic mistake.

MISTAKE: no barrier between writing plane z into shared memory and reading the neighbours: a thread may read a slot
         another warp has not written yet (or still holds plane z - 1).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day10_stencil3d_register_tiling"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '    cuda.syncthreads()  # plane z and its halo are complete\n',
        '    # MISTAKE: no cuda.syncthreads() here\n',
    ),
]
