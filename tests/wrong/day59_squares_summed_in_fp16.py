"""Day 59, deliberately wrong: day59_fused_add_rmsnorm.py with one classic mistake.

MISTAKE: the running sum of squares is kept in float16 (the inputs' dtype) instead of float32: a
         float16 row of values ~300 has squares of 9e4, past float16's largest finite 65504, so the sum
         is inf, 1 / sqrt(inf) is 0 and every output of the row is 0.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day59_fused_add_rmsnorm"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "        ss += held[j] * held[j]\n",
        "        ss = float32(float16(ss + held[j] * held[j]))  # MISTAKE: the sum must stay float32\n",
    ),
]
