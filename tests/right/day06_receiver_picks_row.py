"""Day 06, written another correct way: day06_conv1d_registers.py with a different shuffle exchange.

RIGHT: every lane offers both of its rows, two shuffles per input brought over, and the reader keeps the one its window
       needs (the next row once lane + d passes 31): twice the solution's shuffles, all in registers.

The grader run against it must pass every test (.ci/prove_graders.py checks): it asserts the day's idea
(registers, no local memory), not the solution's exact instruction counts.
"""

SOLUTION = "day06_conv1d_registers"
EDITS = [  # (text in the solution, what this version puts there)
    (
        ('                    here, next_row = r[e], r[V + e]\n'
         '                    w[d * V + e] = cuda.shfl_sync(FULL_MASK, here if lane >= d else next_row, src)\n'),
        ('                    this_row = cuda.shfl_sync(FULL_MASK, r[e], src)\n'
         '                    next_row = cuda.shfl_sync(FULL_MASK, r[V + e], src)\n'
         '                    w[d * V + e] = this_row if lane + d < WARP else next_row\n'),
    ),
]
