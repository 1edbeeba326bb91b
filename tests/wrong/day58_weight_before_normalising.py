"""Day 58, deliberately wrong: day58_layernorm_welford.py with one classic mistake.

MISTAKE: the fused write pass applies the weight before normalising, (x w - mean) rstd + b instead of
         (x - mean) rstd w + b: the mean and the variance belong to x, not to x w, so every column with a
         weight other than 1 is shifted.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day58_layernorm_welford"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "                wide.store4(out, r, c, ((a0 - mean) * rstd * w0 + b0, (a1 - mean) * rstd * w1 + b1,\n"
        "                                        (a2 - mean) * rstd * w2 + b2, (a3 - mean) * rstd * w3 + b3))\n",
        "                wide.store4(out, r, c, ((a0 * w0 - mean) * rstd + b0, (a1 * w1 - mean) * rstd + b1,\n"
        "                                        (a2 * w2 - mean) * rstd + b2, (a3 * w3 - mean) * rstd + b3))\n",
    ),
    (
        "                out[r, k] = (x[r, k] - mean) * rstd * weight[k] + bias[k]\n",
        "                out[r, k] = (x[r, k] * weight[k] - mean) * rstd + bias[k]  # MISTAKE: weight before normalising\n",
    ),
]
