"""Day 71, deliberately wrong: day71_fused_mlp.py with one classic mistake.

MISTAKE: the Numba epilogue stores every column of its tile without the col < inter guard. The packed
         weights are padded to whole groups and whole 128-column tiles, so the last column tile runs
         past inter: its (zero) outputs land beyond h's columns -- an index error in the simulator, the
         next row's first columns (or past the end of h) on a GPU.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day71_fused_mlp"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "                if col < inter:\n"
        "                    gate = acc[i * TN + 2 * p]  # gate and up of one column: the same thread's registers\n",
        "                if True:  # MISTAKE: no guard on the last, partial column tile\n"
        "                    gate = acc[i * TN + 2 * p]  # gate and up of one column: the same thread's registers\n",
    ),
]
