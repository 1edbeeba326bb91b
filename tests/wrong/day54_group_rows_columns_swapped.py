"""Day 54, deliberately wrong: day54_l2_tiling.py with one classic mistake.

MISTAKE: the roles of the group's rows and columns swapped: the tile row taken from w // rows and
         the column from w % rows. Where the group is not square (rows != tiles_n) blocks land on
         tiles outside the grid or on tiles another block already took, and others are never
         computed.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day54_l2_tiling"
EDITS = [  # (text in the solution, what the mistake puts there)
    ("    tc = within // rows  # consecutive blocks go down the group's rows first\n"
     "    tr = first_row + (within - tc * rows)\n",
     "    tr = first_row + within // rows\n"
     "    tc = within - (within // rows) * rows\n"),
]
