"""Day 06, written another correct way: day06_conv1d_registers.py with one change.

RIGHT: four outputs per lane instead of eight: two 8-byte words a lane, rows of 128 outputs, and each lane's window
       reaches four lanes ahead instead of two (the same 16 shuffled inputs, other registers and loads).

The grader run against it must pass every test (.ci/prove_graders.py checks): it asserts the day's idea
(registers, no local memory), not the solution's exact instruction counts.
"""

SOLUTION = "day06_conv1d_registers"
EDITS = [  # (text in the solution, what this version puts there)
    (
        'V = 8  # consecutive inputs and outputs per lane: four 8-byte words\n',
        'V = 4  # consecutive inputs and outputs per lane: two 8-byte words\n',
    ),
]
