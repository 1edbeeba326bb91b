"""Day 11, deliberately wrong: day11_registers_occupancy.py with one classic mistake.

MISTAKE: the two-pass kernel has no `c < cols` guard, so the last block's extra threads read and write past the end of
         the arrays (silent corruption on a GPU, an IndexError in the simulator).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day11_registers_occupancy"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        ('    if c >= x.shape[1]:\n'
         '        return\n'),
        '',
    ),
]
