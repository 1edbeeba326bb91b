"""Day 21, deliberately wrong: day21_bank_conflicts.py with one classic mistake.

MISTAKE: no barrier between staging the tile and reading its columns in the optimized kernel: a warp reads
         a row of the transposed tile whose elements the block's other warps may not have stored yet.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day21_bank_conflicts"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    cuda.syncthreads()  # a row of the tile holds elements that every warp of the block loaded\n",
        "    # MISTAKE: no cuda.syncthreads() here\n",
    ),
]
