"""Day 24, written another way: day24_reduction_sequential.py with a correct variant.

RIGHT: the first add tests once per block instead of once per load: a block whose 2 * THREADS elements all lie inside
       x adds its pair with no guards; only the last, ragged block guards each load.

The grader run against it must pass (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day24_reduction_sequential"
EDITS = [  # (text in the solution, what the variant puts there)
    (
        '    a = x[i] if i < n else float32(0.0)\n'
        '    b = x[j] if j < n else float32(0.0)\n'
        '    sm[t] = a + b\n',
        '    if uint64(cuda.blockIdx.x + 1) * uint64(PAIR) <= n:\n'
        '        sm[t] = x[i] + x[j]  # the whole block inside x: no guards\n'
        '    else:\n'
        '        sm[t] = (x[i] if i < n else float32(0.0)) + (x[j] if j < n else float32(0.0))\n',
    ),
]
