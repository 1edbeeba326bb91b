"""Day 02, deliberately wrong: day02_grids_2d.py with one classic mistake.

MISTAKE: the naive kernel has no guard on the row index, so the threads of the last block that hang past the bottom of
         the matrix read and write rows that do not exist.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day02_grids_2d"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        ('    if r < rows:\n'
         "        # Neighbouring threads are a whole row (cols * 4 bytes) apart: a warp's 32 loads land in\n"
         '        # 32 different sectors, and only 4 bytes of each 32-byte sector are used per instruction.\n'
         '        for c in range(cols):\n'
         '            out[r, c] = x[r, c] + bias[c]\n'),
        ('    for c in range(cols):\n'
         '        out[r, c] = x[r, c] + bias[c]\n'),
    ),
]
