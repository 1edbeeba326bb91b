"""Day 36, deliberately wrong: day36_spmv_ell_sell.py with one classic mistake.

MISTAKE: the SELL kernel stores y[i] (the row's sorted position) instead of y[perm[i]]: y comes out in
         sorted order, right only where the sort moved no row.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day36_spmv_ell_sell"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '            y[perm[i]] = acc  # scattered',
        '            y[i] = acc  # the permutation forgotten',
    ),
]
