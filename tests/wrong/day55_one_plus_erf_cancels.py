"""Day 55, deliberately wrong: day55_fused_bias_gelu.py with one classic mistake.

MISTAKE: GELU written as the textbook formulas, 0.5 z (1 + tanh(u)) and 0.5 z (1 + erf(z / sqrt 2)),
         in float32: for z below about -3, 1 + tanh and 1 + erf subtract two numbers near -1 and keep
         only a few (at z < -5.5, none) of the result's digits. Right at GELU's bend, wrong in its tail.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day55_fused_bias_gelu"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    num = float32(1.0) if u >= float32(0.0) else e\n    return z * num / (float32(1.0) + e)\n",
        "    return float32(0.5) * z * (float32(1.0) + math.tanh(u))  # MISTAKE: cancels for z << 0\n",
    ),
    (
        "    return float32(0.5) * z * math.erfc(-z * float32(SQRT_HALF))\n",
        "    return float32(0.5) * z * (float32(1.0) + math.erf(z * float32(SQRT_HALF)))  # MISTAKE: cancels\n",
    ),
]
