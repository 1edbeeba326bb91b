"""Day 63, deliberately wrong: day63_int8_gemv.py with one classic mistake.

MISTAKE: the int8 GEMV applies the scale per weight with the column's index, scales[k], instead of
         the row's, scales[r], once at the end: y[r] = sum_k scales[k] * w[r, k] * x[k]. Per-channel
         scales belong to output channels (rows); a column index also runs past the end of scales
         whenever in > out.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day63_int8_gemv"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "                        part += (f[e] - magic) * xf[e]  # exact: the weight itself, as float32\n",
        "                        part += (f[e] - magic) * scales[INT8_GROUP * (g + u * threads) + e] * xf[e]"
        "  # MISTAKE: the column's scale\n",
    ),
    (
        "            y[r0 + t] = total * scales[r0 + t]  # the row's scale, once\n",
        "            y[r0 + t] = total  # MISTAKE: scaled per weight above, by column\n",
    ),
]
