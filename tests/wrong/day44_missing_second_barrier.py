"""Day 44, deliberately wrong: day44_matmul_vectorized.py with one classic mistake.

MISTAKE: no barrier after the outer products: a fast warp stores the next k step's tiles (a float4 of
         B, four transposed words of A) while slower warps still read their fragments from this
         step's (the simulator names the race); right whenever K <= 8, and on the GPU wrong only now
         and then.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day44_matmul_vectorized"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        cuda.syncthreads()  # the next k step overwrites tiles that slower warps are still reading\n',
        '        # MISTAKE: no cuda.syncthreads() here\n',
    ),
]
