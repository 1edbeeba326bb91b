"""Day 55, deliberately wrong: day55_fused_bias_gelu.py with one classic mistake.

MISTAKE: the naive bias kernel adds bias[r] (the row's index) instead of bias[c]: a bias per token
         instead of per feature (out of bounds once rows > cols).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day55_fused_bias_gelu"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "        z[r, c] = x[r, c] + bias[c]\n",
        "        z[r, c] = x[r, c] + bias[r]  # MISTAKE: indexed by row\n",
    ),
]
