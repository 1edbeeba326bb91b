"""Day 56, deliberately wrong: day56_softmax_online.py with one classic mistake.

MISTAKE: exponents are taken against the running max even when it is -inf: in a fully masked row (and
         in every merge of two parts that saw only -inf) exp(-inf - -inf) is NaN, and NaN spreads
         through the block's merge into the whole row.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day56_softmax_online"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    return m if m != NEG_INF else float32(0.0)\n",
        "    return m  # MISTAKE: -inf must become 0 here, or -inf - -inf is NaN\n",
    ),
]
