"""Day 62, deliberately wrong: day62_embedding_gather.py with one classic mistake.

MISTAKE: the naive kernel indexes the table by the token's position t instead of its id ids[t] (the id
         taken from the wrong array: the output's row index): out[t] = table[t], right only for
         ids = 0, 1, 2, ...; past the table's last row every position is "out of range" and gives NaN.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day62_embedding_gather"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "        tok = ids[t]  # every thread of the row loads it again: hidden loads of one id\n",
        "        tok = t  # MISTAKE: the token's position, not its id\n",
    ),
]
