"""Day 09, written another correct way: day09_conv2d_const_shared.py with a smaller tile.

RIGHT: each thread slides its window down 8 rows instead of 16: (64, 32) output tiles, a (68, 36) shared span about
       half the solution's, the same constant taps, barrier and register window.

The grader run against it must pass every test (.ci/prove_graders.py checks): it asserts the day's idea
(constant taps, a shared tile, a barrier, no local memory), not the solution's tile shape.
"""

SOLUTION = "day09_conv2d_const_shared"
EDITS = [  # (text in the solution, what this version puts there)
    (
        'ROWS_PER_THREAD = 16  # each thread slides its window down this many rows of its column\n',
        'ROWS_PER_THREAD = 8  # each thread slides its window down this many rows of its column\n',
    ),
]
