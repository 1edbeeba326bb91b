"""Day 58, deliberately wrong: day58_layernorm_welford.py with one classic mistake.

MISTAKE: Chan's merge adds the two parts' M2 but drops delta^2 na nb / n, the spread BETWEEN the parts'
         means: only the spread inside each group of four (and inside each thread's part) is counted, so
         the variance comes out too small and every output too large.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day58_layernorm_welford"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    m2 = m2a + m2b + delta * delta * na * f\n",
        "    m2 = m2a + m2b  # MISTAKE: + delta^2 na nb / n, the spread between the parts' means\n",
    ),
]
