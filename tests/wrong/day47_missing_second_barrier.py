"""Day 47, deliberately wrong: day47_matmul_tensor_cores.py with one classic mistake.

MISTAKE: half_loads without the barrier after the outer products: a fast warp stores the next k step's
         widened tiles while slower warps still load their fragments from this step's (the simulator
         names the race); right whenever K <= 8.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day47_matmul_tensor_cores"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        cuda.syncthreads()  # the next k step overwrites tiles that slower warps are still reading\n',
        '        # MISTAKE: no cuda.syncthreads() here\n',
    ),
]
