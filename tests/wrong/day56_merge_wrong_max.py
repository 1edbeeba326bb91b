"""Day 56, deliberately wrong: day56_softmax_online.py with one classic mistake.

MISTAKE: the (m, s) merge keeps the first pair's max instead of the larger one, so a lane or warp whose
         part of the row holds the true max has its sum measured against a smaller max (too large,
         even inf at logits of 1e4), and the row is normalised by the wrong max.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day56_softmax_online"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    m = max(m1, m2)\n    base = max_or_zero(m)\n",
        "    m = m1  # MISTAKE: should be max(m1, m2)\n    base = max_or_zero(m)\n",
    ),
]
