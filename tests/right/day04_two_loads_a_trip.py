"""Day 04, written another way: day04_roofline.py with a different correct kernel.

RIGHT: the unrolled kernel takes two elements a trip instead of four: fewer bytes in flight, the same coalesced
       pattern, correct, so the grader must pass it (it asserts loads before stores, not how many).

The grader run against it must pass (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day04_roofline"
EDITS = [  # (text in the solution, what the other way puts there)
    (
        ('    while i + 3 * stride < n:\n'
         '        x0 = x[i]\n'
         '        x1 = x[i + stride]\n'
         '        x2 = x[i + 2 * stride]\n'
         '        x3 = x[i + 3 * stride]\n'
         '        out[i] = alpha * x0\n'
         '        out[i + stride] = alpha * x1\n'
         '        out[i + 2 * stride] = alpha * x2\n'
         '        out[i + 3 * stride] = alpha * x3\n'
         '        i += 4 * stride\n'),
        ('    while i + stride < n:\n'
         '        x0 = x[i]\n'
         '        x1 = x[i + stride]\n'
         '        out[i] = alpha * x0\n'
         '        out[i + stride] = alpha * x1\n'
         '        i += 2 * stride\n'),
    ),
]
