"""Day 24, deliberately wrong: day24_reduction_sequential.py with one classic mistake.

MISTAKE: no barrier between the steps of the sequential tree: at step s, thread t reads sm[t + s] while thread t + s
         (another warp, for s >= 32) may still be adding its own pair from the step before.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day24_reduction_sequential"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        cuda.syncthreads()  # the next step reads sums other threads wrote in this one\n',
        '        # MISTAKE: no cuda.syncthreads() between the steps\n',
    ),
]
