"""Day 04, deliberately wrong: day04_roofline.py with one classic mistake.

MISTAKE: the unrolled kernel has no tail loop, so the last elements (fewer than four strides' worth) are never written.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day04_roofline"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        ('    while i < n:  # fewer than four strides left\n'
         '        out[i] = alpha * x[i]\n'
         '        i += stride\n'),
        '',
    ),
]
