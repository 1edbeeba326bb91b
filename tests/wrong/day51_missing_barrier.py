"""Day 51, deliberately wrong: day51_onchip_double_buffering.py with one classic mistake.

MISTAKE: the double-buffered loop drops its one barrier: a thread reads source words of tile k that other warps have not
         stored yet (a read-after-write race on shared memory).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day51_onchip_double_buffering"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        cuda.syncthreads()  # tile k is in; and everyone has finished reading the other half (tile k - 1)\n',
        '        # MISTAKE: no cuda.syncthreads() here\n',
    ),
]
