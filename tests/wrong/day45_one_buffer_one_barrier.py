"""Day 45, deliberately wrong: day45_matmul_double_buffering.py with one classic mistake.

MISTAKE: double buffering's single barrier kept, but with ONE copy of each tile: the prefetched values
         of the next step are stored into the copy this step's outer products read, so a fast warp
         overwrites fragments that slower warps have not loaded yet (the simulator names the race:
         a write to a_tile that another thread read since the last barrier). Right whenever K <= 16
         (no step after the first); on the GPU wrong only now and then. One copy needs day 44's two
         barriers a step.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day45_matmul_double_buffering"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        a_base = A_COPY - a_base\n',
        '        a_base = a_base  # MISTAKE: the same copy again\n',
    ),
    (
        '        b_base = B_COPY - b_base\n',
        '        b_base = b_base  # MISTAKE: the same copy again\n',
    ),
]
