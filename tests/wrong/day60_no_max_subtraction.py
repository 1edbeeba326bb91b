"""Day 60, deliberately wrong: day60_cross_entropy.py with one classic mistake.

MISTAKE: the fused kernel takes its exponents against 0 instead of the row max (log-sum-exp without the
         max subtraction): at logits of 1e4, exp(1e4) overflows float32 to inf, the sum is inf, and the
         gradient and the loss become inf or NaN.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day60_cross_entropy"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "b = max_or_zero(m_new)  # the trip's base: the running max (0 only while it is -inf)",
        "b = float32(0.0)  # MISTAKE: should be max_or_zero(m_new)",
    ),
    (
        "b = max_or_zero(m_new)  # the leftover group's base",
        "b = float32(0.0)  # MISTAKE: should be max_or_zero(m_new)",
    ),
    (
        "            base = max_or_zero(m)\n            p_scale",
        "            base = float32(0.0)  # MISTAKE: should be max_or_zero(m)\n            p_scale",
    ),
    (
        "term = ((m - xf[start + c]) + math.log(s)) * inv_n",
        "term = (math.log(s) - xf[start + c]) * inv_n",
    ),
]
