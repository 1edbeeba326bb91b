"""Day 55, deliberately wrong: day55_fused_bias_gelu.py with one classic mistake.

MISTAKE: the fused kernel's thread count not rounded to a multiple of cols / gcd(cols, 4): the grid's
         stride is no longer a whole number of rows, so a thread's quads drift across columns while
         it keeps adding the biases it loaded for its first one.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day55_fused_bias_gelu"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    return period * max(1, min(target // period, nq // (MIN_QUADS * period)))\n",
        "    return max(1, min(target, nq // MIN_QUADS))  # MISTAKE: not a whole number of periods\n",
    ),
]
