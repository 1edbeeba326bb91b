"""Day 61, deliberately wrong: day61_rotary_embeddings.py with one classic mistake.

MISTAKE: the 16-byte kernel reads positions[0] for every token: right for a batch of one decode token
         (and for any test whose tokens all sit at one position), wrong for every other token of a
         prefill or a batch.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day61_rotary_embeddings"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    p = positions[t]\n"
        "    if p < 0 or p >= cache.shape[0]:  # past the table: NaN, never a read outside it\n",
        "    p = positions[0]  # MISTAKE: token 0's position for every token\n"
        "    if p < 0 or p >= cache.shape[0]:  # past the table: NaN, never a read outside it\n",
    ),
]
