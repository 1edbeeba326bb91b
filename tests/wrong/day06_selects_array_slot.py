"""Day 06, deliberately wrong: day06_conv1d_registers.py with one classic mistake.

MISTAKE: the sender chooses between the array slots r[e] and r[V + e] instead of between their two values: the
         compiler turns the choice into an address, and the window moves to local memory (right results, stack > 0).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day06_conv1d_registers"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        ('                    here, next_row = r[e], r[V + e]\n'
         '                    w[d * V + e] = cuda.shfl_sync(FULL_MASK, here if lane >= d else next_row, src)\n'),
        '                    w[d * V + e] = cuda.shfl_sync(FULL_MASK, r[e] if lane >= d else r[V + e], src)\n',
    ),
]
