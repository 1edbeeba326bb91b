"""Day 54, deliberately wrong: day54_l2_tiling.py with one classic mistake.

MISTAKE: every group is taken as GROUP_M tile rows tall, the last one too: when GROUP_M does not
         divide tiles_m, the last group's blocks are spread over rows past M (tiles outside the
         grid, whose outputs the kernel's guards skip), so some tiles of the last group's rows are
         never computed.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day54_l2_tiling"
EDITS = [  # (text in the solution, what the mistake puts there)
    ("    rows = min(GROUP_M, tiles_m - first_row)  # the last group: only the tile rows that exist\n",
     "    rows = GROUP_M\n"),
]
