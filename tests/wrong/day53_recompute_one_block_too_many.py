"""Day 53, deliberately wrong: day53_fusion_checkpointing.py with one classic mistake.

MISTAKE: recompute replays the blocks from the checkpoint up to and including block i (an off-by-one
         in the range), so it returns block i + 1's input and hidden instead of block i's: nothing
         faults, and the last block's looks plausible; the kept activations tell them apart.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day53_fusion_checkpointing"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    for j in range(start, i):\n        _, a = block_forward(a, *params[j])\n    w1, b1, _, _ = params[i]\n",
        "    for j in range(start, i + 1):  # MISTAKE: one block too many\n"
        "        _, a = block_forward(a, *params[j])\n    w1, b1, _, _ = params[min(i + 1, len(params) - 1)]\n",
    ),
]
