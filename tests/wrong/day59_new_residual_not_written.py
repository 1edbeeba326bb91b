"""Day 59, deliberately wrong: day59_fused_add_rmsnorm.py with one classic mistake.

MISTAKE: the fused kernel writes only out and drops the store of new_residual = x + residual: the
         next layer reads its residual from that array, which is left as it was (here: poison).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day59_fused_add_rmsnorm"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "            nr[k] = held[j]  # exact: held[j] is a value of the arrays' dtype\n",
        "            pass  # MISTAKE: new_residual must be stored too\n",
    ),
    (
        "\n                    wide.store4(new_residual, r, VEC * g, (h0, h1, h2, h3))\n",
        "\n                    pass  # MISTAKE: new_residual must be stored too\n",
    ),
]
