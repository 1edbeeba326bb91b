"""Day 63, deliberately wrong: day63_int8_gemv.py with one classic mistake.

MISTAKE: the warp's reduction starts at offset 8 instead of 16: four shuffle stages instead of five,
         so lane 0 ends with the sum of lanes 0-15 only and the other half of every row is lost.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day63_int8_gemv"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    offset = WARP // 2\n",
        "    offset = WARP // 4  # MISTAKE: the first stage (lanes 16-31 onto 0-15) is skipped\n",
    ),
]
