"""Day 19, deliberately wrong: day19_shared_staging.py with one classic mistake.

MISTAKE: no barrier between staging the segment and reading it backwards: thread t reads the slot that a thread of
         another warp loads, which may not have happened yet (the simulator names the race).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day19_shared_staging"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '    cuda.syncthreads()  # thread t reads slots that threads of other warps loaded\n',
        '    # MISTAKE: no cuda.syncthreads() here\n',
    ),
]
