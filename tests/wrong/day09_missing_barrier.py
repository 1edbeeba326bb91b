"""Day 09, deliberately wrong: day09_conv2d_const_shared.py with one classic mistake.

MISTAKE: no barrier after staging the tile: a thread reads window rows and halo pixels that other warps may not have
         written yet.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day09_conv2d_const_shared"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    cuda.syncthreads()  # a thread's window spans pixels that other warps staged\n",
        '    # MISTAKE: no cuda.syncthreads() here\n',
    ),
]
