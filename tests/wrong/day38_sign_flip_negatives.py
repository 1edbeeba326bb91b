"""Day 38, deliberately wrong: day38_checkpoint_topk.py with one classic mistake.

MISTAKE: the order-preserving mapping flips only the sign bit for negative floats too (bits ^ SIGN), as
         for positives: negative floats then order by magnitude the wrong way round (-3.0 ranks above
         -1.0), so top-k over negative values picks the most negative ones.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day38_checkpoint_topk"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "        return uint32(~bits)  # Numba types ~uint32 and uint32 | uint32 as uint64: cast back\n",
        "        return uint32(bits ^ uint32(SIGN))  # MISTAKE: a negative's magnitude order is not reversed\n",
    ),
]
