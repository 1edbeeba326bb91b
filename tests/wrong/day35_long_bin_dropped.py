"""Day 35, deliberately wrong: day35_spmv_csr.py with one classic mistake.

MISTAKE: the binned version never launches the last bin (the long rows' chunks): a row of more than WARP_MAX
         nonzeros keeps the 0 the short kernel wrote, so a matrix whose one row holds most of it comes out wrong.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day35_spmv_csr"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        if chunks is not None:\n',
        '        if False:  # the last bin forgotten\n',
    ),
]
