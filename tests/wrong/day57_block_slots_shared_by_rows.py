"""Day 57, deliberately wrong: day57_softmax_rows.py with one classic mistake.

MISTAKE: the block kernel keeps one set of slots for every row (the parity never flips) and still has
         one barrier a row: a fast warp's lane 0 writes the NEXT row's pair into a slot that a slower
         warp is still reading for this row, so the block merge reads another row's partials (a
         write-after-read race the simulator reports; on a GPU, an occasional wrong row).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day57_softmax_rows"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "            p ^= 1  # the next row's pairs go to the other slots\n",
        "            # MISTAKE: p never flips: every row's pairs in the same slots, one barrier a row\n",
    ),
]
