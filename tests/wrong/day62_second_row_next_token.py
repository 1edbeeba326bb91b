"""Day 62, deliberately wrong: day62_embedding_gather.py with one classic mistake.

MISTAKE: a warp's second row is gathered with the next token's id (ids[t0 + 2], not ids[t0 + 1]): the
         row index and the id index drift apart by one, the rows land one token early (every odd row of
         the batch holds the following token's embedding; the last pair repeats its first row).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day62_embedding_gather"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "        b = ids[t0 + 1]\n",
        "        b = ids[t0 + 2] if t0 + 2 < tokens else a  # MISTAKE: the next token's id\n",
    ),
]
