"""Day 23, deliberately wrong: day23_reduction_interleaved.py with one classic mistake.

MISTAKE: no barrier between the steps of the naive tree: at step s, thread t reads sm[t + s] that thread t + s may
         not have finished adding into yet (another warp's sum from the step before), so partial sums are lost
         or counted twice, in an order the GPU does not promise.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day23_reduction_interleaved"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        cuda.syncthreads()  # the next step reads sums other threads wrote in this one\n',
        '        # MISTAKE: no cuda.syncthreads() between the steps\n',
    ),
]
