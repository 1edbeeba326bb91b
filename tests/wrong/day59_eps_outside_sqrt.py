"""Day 59, deliberately wrong: day59_fused_add_rmsnorm.py with one classic mistake.

MISTAKE: eps is added outside the square root, 1 / (sqrt(mean square) + eps), instead of
         1 / sqrt(mean square + eps): the same where the mean square is large, but a row of ~1e-3
         (mean square 1e-6, below eps = 1e-5) is scaled by ~1e3 instead of ~3e2.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day59_fused_add_rmsnorm"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    return float32(1.0) / math.sqrt(ss / float32(cols) + eps)\n",
        "    return float32(1.0) / (math.sqrt(ss / float32(cols)) + eps)  # MISTAKE: eps belongs inside\n",
    ),
]
