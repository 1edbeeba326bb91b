"""Day 62, deliberately wrong: day62_embedding_gather.py with one classic mistake.

MISTAKE: the block-per-row kernel copies four quads a thread a step and forgets the rest of the row: when
         the row's quads are not a multiple of four per thread (a row of 130 quads over 32 threads, of one
         quad, ...), the quads after the last full step are never copied and stay the poison.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day62_embedding_gather"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    while q < nq:  # the row's last quads, fewer than QUADS a thread\n",
        "    while False:  # MISTAKE: the quads after the last full step of four are never copied\n",
    ),
]
