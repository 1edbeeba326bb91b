"""Day 69, deliberately wrong: day69_gqa_attention.py with one classic mistake.

MISTAKE: the grouped Numba kernel's causal mask aligned top-left (query i sees keys j <= i) instead of
         bottom-right (j <= i + seq_k - seq_q): the same when seq_q == seq_k, wrong for 5 queries
         against 70 keys or 40 queries against 9.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day69_gqa_attention"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '"(causal and key > wrow0 + r - warp * WARP_ROWS + shift)"',
        '"(causal and key > wrow0 + r - warp * WARP_ROWS)"',
    ),
]
