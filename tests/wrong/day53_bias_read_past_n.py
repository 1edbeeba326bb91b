"""Day 53, deliberately wrong: day53_fusion_checkpointing.py with one classic mistake.

MISTAKE: the biases loaded with no column guard: a tile column past N reads bias[col] beyond its N
         entries (the simulator raises; on the GPU it reads whatever lies there, never stored, so
         the output looks right: only a bounds check or the simulator shows it).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day53_fusion_checkpointing"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "        if col < n:  # bias has N entries: a column past N has none to read\n"
        "            b_frag[j] = bias[col]\n"
        "        else:\n"
        "            b_frag[j] = float32(0.0)\n",
        "        b_frag[j] = bias[col]  # MISTAKE: no guard\n",
    ),
]
