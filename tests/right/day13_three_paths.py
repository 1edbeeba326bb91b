"""Day 13, written another way: day13_thread_coarsening.py with a different correct kernel.

RIGHT: the coarsened kernel has a third path, for the top tile of a tall column (loads clamped at the top only, stores
       unguarded): more load instructions in the PTX, still each row and weight loaded once per thread, so the
       grader must pass it.

The grader run against it must pass (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day13_thread_coarsening"
EDITS = [  # (text in the solution, what the other way puts there)
    (
        ('    else:\n'
         '        for j in range(WINDOW):\n'),
        ('    elif r0 + COARSEN + RADIUS <= rows:\n'
         '        for j in range(WINDOW):\n'
         '            win[j] = x[max(r0 + j - RADIUS, 0), c]\n'
         '        for i in range(COARSEN):\n'
         '            acc = float32(0.0)\n'
         '            for k in range(TAPS):\n'
         '                acc += wk[k] * win[i + k]\n'
         '            out[r0 + i, c] = acc\n'
         '    else:\n'
         '        for j in range(WINDOW):\n'),
    ),
]
