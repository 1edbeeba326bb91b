"""Day 56, deliberately wrong: day56_softmax_online.py with one classic mistake.

MISTAKE: exponents are taken against 0 instead of the row max (softmax without the max subtraction):
         exp(1e4) overflows float32 to inf, and the output becomes inf / inf = NaN.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day56_softmax_online"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    return m if m != NEG_INF else float32(0.0)\n",
        "    return float32(0.0)  # MISTAKE: should be the running max (0 only when it is -inf)\n",
    ),
]
