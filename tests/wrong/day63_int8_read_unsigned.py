"""Day 63, deliberately wrong: day63_int8_gemv.py with one classic mistake.

MISTAKE: the weights' bytes are unpacked as unsigned (uint8): no sign flip before the bytes go into
         the mantissa of 2^23, and 2^23 subtracted instead of 2^23 + 128. Every non-negative weight
         comes out right; -1 becomes 255 and -128 becomes 128.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day63_int8_gemv"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    u = word ^ SIGN_BITS\n",
        "    u = word  # MISTAKE: read as uint8, the sign bit never flipped\n",
    ),
    (
        "MAGIC = 8388736.0  #",
        "MAGIC = 8388608.0  # MISTAKE: 2^23, for unsigned bytes;",
    ),
]
