"""Day 68, deliberately wrong: day68_causal_attention.py with one classic mistake.

MISTAKE: only the partial last tile is masked (a key >= seq_k), not the tiles that cross the
         diagonal, in both kernels: once the loop ends at the diagonal tile it is easy to think the
         mask is done, but that tile's keys past each row's window are still in it, and every row
         but the block's last attends to keys in its future. Right only where the diagonal tile is
         also the partial last one (seq_k not a multiple of 64 and nothing else crossing).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day68_causal_attention"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    return last_key >= seq_k or (causal and last_key > row0 + seq_k - seq_q)\n",
        "    return last_key >= seq_k  # MISTAKE: the diagonal tile not masked\n",
    ),
    (
        "    return last_key >= s.seq_k || (CAUSAL && last_key > row_lo + s.seq_k - s.seq_q);\n",
        "    return last_key >= s.seq_k;  // MISTAKE: the diagonal tile not masked\n",
    ),
]
