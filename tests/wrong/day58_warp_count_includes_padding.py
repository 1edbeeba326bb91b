"""Day 58, deliberately wrong: day58_layernorm_welford.py with one classic mistake.

MISTAKE: the warp kernel's lanes count every 16-byte group of their buffer, also the groups past the row's
         end (the padding of the size class), so a lane's count is too large: its mean offset s / n is too
         small, and Chan's merge weighs the lanes wrongly. Rows that fill their class exactly (128, 256,
         512, ... floats) come out right; every other length is off.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day58_layernorm_welford"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "                if VEC * (lane + WARP * j) < cols:\n                    n += FOUR\n",
        "                n += FOUR  # MISTAKE: counts the padding past the row too\n"
        "                if VEC * (lane + WARP * j) < cols:\n",
    ),
]
