"""Day 28, deliberately wrong: day28_scan_brent_kung.py with one classic mistake.

MISTAKE: no barrier between the up-sweep's levels: a level reads partial sums that the level below, in other warps,
         may not have written yet (the simulator names the race; on a GPU the block totals come out short).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day28_scan_brent_kung"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "        cuda.syncthreads()  # a level reads the sums the level below wrote, in other warps\n",
        "        # MISTAKE: no cuda.syncthreads() between the up-sweep's levels\n",
    ),
]
