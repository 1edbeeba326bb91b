"""Day 35, deliberately wrong: day35_spmv_csr.py with one classic mistake.

MISTAKE: the shuffle tree starts at width // 4 instead of width // 2, one step short: lanes 16-31 of a warp
         never reach lane 0, so a row longer than 16 nonzeros loses part of its sum.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day35_spmv_csr"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '    offset = width // 2\n',
        '    offset = width // 4\n',
    ),
]
