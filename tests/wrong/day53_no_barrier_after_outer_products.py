"""Day 53, deliberately wrong: day53_fusion_checkpointing.py with one classic mistake.

MISTAKE: the one-kernel block's second GEMM has no barrier after a k step's outer products: a fast
         warp stores the next step's W2 tile over the one slower warps are still reading (a race
         the simulator names; on a GPU, y silently mixes two k steps).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day53_fusion_checkpointing"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "            cuda.syncthreads()  # wt (and, after the last step, ht) is free for the next chunk\n",
        "            pass  # MISTAKE: no barrier: the next k step overwrites wt while it is read\n",
    ),
]
