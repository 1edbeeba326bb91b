"""Day 25, deliberately wrong: day25_reduction_last_warp.py with one classic mistake.

MISTAKE: the unrolled last warp without cuda.syncwarp() (the pre-Volta code, where the warp's lanes ran in lock-step
         and `volatile` was thought enough): lane t reads partial[t + s] while lane t + s may still be storing it.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day25_reduction_last_warp"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    cuda.syncwarp()  # WAR: the slot's last reader (lane t - 2s, a step ago) is done before it is overwritten\n",
        "    # MISTAKE: no cuda.syncwarp() before the store\n",
    ),
    (
        "    cuda.syncwarp()  # RAW: lane t + s's store is visible before lane t reads it\n",
        "    # MISTAKE: no cuda.syncwarp() between the store and the load\n",
    ),
]
