"""Day 57, deliberately wrong: day57_softmax_rows.py with one classic mistake.

MISTAKE: the warp's butterfly sum starts at offset 8 instead of 16 (the xor-16 stage is missing): lanes
         0-15 and lanes 16-31 each hold the sum of their own half-warp only, so a row of more than 16
         lanes' worth of values is normalised by two different, too small sums.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day57_softmax_rows"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    v += cuda.shfl_xor_sync(FULL_MASK, v, 16)\n",
        "",
    ),
]
