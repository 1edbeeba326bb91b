"""Day 14, written another way: day14_ilp_accumulators.py with a different correct kernel.

RIGHT: the optimized kernel keeps two accumulators, two rows a trip, instead of four: fewer chains, still independent
       ones, so the grader must pass it (it asserts several chains, not how many).

The grader run against it must pass (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day14_ilp_accumulators"
EDITS = [  # (text in the solution, what the other way puts there)
    (
        ('    while r + 3 < end:\n'
         '        # Four loads with no dependence between them go out back to back; each add then only waits\n'
         '        # for its own load and its own chain.\n'
         '        v0 = x[r, c]\n'
         '        v1 = x[r + 1, c]\n'
         '        v2 = x[r + 2, c]\n'
         '        v3 = x[r + 3, c]\n'
         '        a0 += v0\n'
         '        a1 += v1\n'
         '        a2 += v2\n'
         '        a3 += v3\n'
         '        r += 4\n'),
        ('    while r + 1 < end:\n'
         '        v0 = x[r, c]\n'
         '        v1 = x[r + 1, c]\n'
         '        a0 += v0\n'
         '        a1 += v1\n'
         '        r += 2\n'),
    ),
]
