"""Day 86, written another way: day86_continuous_batching.py with one correct change.

RIGHT: move_rows_kernel moves one 8-byte word per lane per trip (no second load in flight): fewer bytes
       in flight per warp, the same rows moved.

The grader run against it must pass every test (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day86_continuous_batching"
EDITS = [  # (text in the solution, what the change puts there)
    (
        ('    while w + WARP < words:\n'
         '        a0 = src[s, w]\n'
         '        a1 = src[s, w + WARP]\n'
         '        dst[d, w] = a0\n'
         '        dst[d, w + WARP] = a1\n'
         '        w += 2 * WARP\n'
         '    if w < words:\n'
         '        dst[d, w] = src[s, w]\n'),
        ('    while w < words:\n'
         '        dst[d, w] = src[s, w]\n'
         '        w += WARP\n'),
    ),
]
