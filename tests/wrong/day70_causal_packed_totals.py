"""Day 70, deliberately wrong: day70_varlen_attention.py with one classic mistake.

MISTAKE: the bottom-right causal offset taken from the packed totals (cu_seqlens_k[-1] -
         cu_seqlens_q[-1]) instead of the sequence's own len_k - len_q (Numba kernel). Right when
         every sequence has as many queries as keys (both offsets 0) or a batch of one; wrong for 5
         queries after a 70-key context packed beside sequences of 1 x 9 and 20 x 20: the totals shift
         every sequence by 73.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day70_varlen_attention"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "shift = seq_k - seq_q  # per sequence: its own lengths, not the packed totals",
        "shift = cu_seqlens_k[cu_seqlens_k.shape[0] - 1] - cu_seqlens_q[cu_seqlens_q.shape[0] - 1]  # MISTAKE",
    ),
]
