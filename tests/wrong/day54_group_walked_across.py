"""Day 54, deliberately wrong: day54_l2_tiling.py with one classic mistake.

MISTAKE: within a group the blocks walk ACROSS the columns first (tc = w % tiles_n): every tile is
         computed once and C is right, but the order is row-major again, so the blocks that run
         together read all of B and nothing is gained in L2.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day54_l2_tiling"
EDITS = [  # (text in the solution, what the mistake puts there)
    ("    tc = within // rows  # consecutive blocks go down the group's rows first\n"
     "    tr = first_row + (within - tc * rows)\n",
     "    tr = first_row + within // tiles_n\n"
     "    tc = within - (within // tiles_n) * tiles_n\n"),
]
