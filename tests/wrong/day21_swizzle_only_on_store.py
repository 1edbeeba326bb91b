"""Day 21, deliberately wrong: day21_bank_conflicts.py with one classic mistake.

MISTAKE: the swizzled tile written at tile[r, c ^ r] but read back at the plain tile[r, c]: the read must undo the
         same permutation, or each column comes back scrambled.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day21_bank_conflicts"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "            out[r, c] = tile[tx, (ty + j) ^ tx]",
        "            out[r, c] = tile[tx, ty + j]",
    ),
]
