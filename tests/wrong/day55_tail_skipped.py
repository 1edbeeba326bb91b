"""Day 55, deliberately wrong: day55_fused_bias_gelu.py with one classic mistake.

MISTAKE: the fused kernel handles whole quads only: when rows * cols is not a multiple of 4 the last
         one to three elements are never written (they stay poisoned: NaN).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day55_fused_bias_gelu"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    while i < n:  # the tail: the last n % 4 elements, no quad of their own\n",
        "    while i < 4 * nq:  # MISTAKE: the tail is never reached\n",
    ),
]
