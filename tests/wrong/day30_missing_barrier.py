"""Day 30, deliberately wrong: day30_checkpoint_summed_area.py with one classic mistake.

MISTAKE: no barrier between the row phase and the column phase: a thread reads a tile row that other warps
         are still completing (the simulator names the race).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day30_checkpoint_summed_area"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    cuda.syncthreads()  # the column phase reads rows that every warp completed\n",
        "    # MISTAKE: no cuda.syncthreads() here\n",
    ),
]
