"""Day 70, deliberately wrong: day70_varlen_attention.py with one classic mistake.

MISTAKE: the K/V tile load guarded by the buffer's end (k_row0 + key < k.shape[0]) instead of the
         sequence's (key < len_k), in the Numba kernel: the keys past a sequence are still masked to
         -inf, so their p is 0, and the next sequence's finite rows add 0 x v = 0: right for every
         sequence but the last, whose partial tile reads the buffer's NaN tail: 0 x NaN = NaN in P V.
         (The CUDA C's cp.async zero fill is day 67's core.)

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day70_varlen_attention"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "if n0 + r < seq_k:  # the sequence's own keys: past them the next one's, or NaN",
        "if k_row0 + n0 + r < k.shape[0]:  # MISTAKE: any row of the buffer",
    ),
]
