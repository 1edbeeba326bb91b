"""Day 68, deliberately wrong: day68_causal_attention.py with one classic mistake.

MISTAKE: the skip bound aligned top-left (the block's last row sees keys up to row_hi) instead of
         bottom-right (row_hi + seq_k - seq_q), in both kernels; the element-wise mask stays right.
         The same when seq_q == seq_k; with 5 queries on 70 keys the loop stops after the first
         tile and drops keys 64..69, which every row sees. (With more queries than keys the bound
         is only too generous: extra tiles, masked away, still right.)

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day68_causal_attention"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    last = min(row0 + BLOCK_M, seq_q) - 1 + seq_k - seq_q  # the block's last row sees keys 0 .. last\n",
        "    last = min(row0 + BLOCK_M, seq_q) - 1  # MISTAKE: top-left\n",
    ),
    (
        "    const int last = row_hi + s.seq_k - s.seq_q;  // bottom-right: row i sees keys j <= i + seq_k - seq_q\n",
        "    const int last = row_hi;  // MISTAKE: top-left\n",
    ),
]
