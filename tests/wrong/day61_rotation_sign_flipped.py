"""Day 61, deliberately wrong: day61_rotary_embeddings.py with one classic mistake.

MISTAKE: the rotation's sign flipped: (x0 c + x1 s, x1 c - x0 s) turns each pair by -theta. q and k
         turned the same wrong way still give scores that depend on m - n only (as n - m), so attention
         "works", but not with a model trained the other way round; position 0 (the identity) hides it.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day61_rotary_embeddings"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    return x0 * c - x1 * s, x1 * c + x0 * s\n",
        "    return x0 * c + x1 * s, x1 * c - x0 * s  # MISTAKE: rotates by -theta\n",
    ),
]
