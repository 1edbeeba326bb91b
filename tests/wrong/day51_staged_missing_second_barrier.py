"""Day 51, deliberately wrong: day51_onchip_double_buffering.py with one classic mistake.

MISTAKE: the staged kernel drops the barrier after the compute: the next tile's stores overwrite sources that other warps
         are still reading (a write-after-read race on shared memory).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day51_onchip_double_buffering"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        cuda.syncthreads()  # the next tile\'s stores must wait until every warp is done reading this one\n',
        '        # MISTAKE: no cuda.syncthreads() here\n',
    ),
]
