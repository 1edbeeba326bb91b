"""Day 61, deliberately wrong: day61_rotary_embeddings.py with one classic mistake.

MISTAKE: the wrong pairing: the 16-byte kernel pairs GPT-J's features as NeoX's, x[i] with
         x[i + head_dim / 2], instead of the neighbours x[2i], x[2i + 1] (a checkpoint converted
         between the two layouts without permuting its q and k projections makes the same error):
         every GPT-J model's attention is scrambled, NeoX's is untouched.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day61_rotary_embeddings"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "        a0, a1 = rotate_pair(a[0], a[1], c[0], s[0])\n"
        "        a2, a3 = rotate_pair(a[2], a[3], c[1], s[1])\n"
        "        b0, b1 = rotate_pair(b[0], b[1], c[2], s[2])\n"
        "        b2, b3 = rotate_pair(b[2], b[3], c[3], s[3])\n",
        "        a0, b0 = rotate_pair(a[0], b[0], c[0], s[0])  # MISTAKE: NeoX's pairs (i, i + d/2)\n"
        "        a1, b1 = rotate_pair(a[1], b[1], c[1], s[1])\n"
        "        a2, b2 = rotate_pair(a[2], b[2], c[2], s[2])\n"
        "        a3, b3 = rotate_pair(a[3], b[3], c[3], s[3])\n",
    ),
]
