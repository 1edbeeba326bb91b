"""Day 55, deliberately wrong: day55_fused_bias_gelu.py with one classic mistake.

MISTAKE: approximate="none" computed with the tanh formula: the two curves differ by at most 4.7e-4
         (at z = -2.7), close enough to look right on a plot, a few hundred times float32's rounding.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day55_fused_bias_gelu"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    if exact:\n        return gelu_erf(z)\n    return gelu_tanh(z)\n",
        "    return gelu_tanh(z)  # MISTAKE: the approximation for both\n",
    ),
]
