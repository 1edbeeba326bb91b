"""Day 65, deliberately wrong: day65_attention_materialised.py with one classic mistake.

MISTAKE: the causal mask is aligned top-left (query i sees keys j <= i), not bottom-right (j <= i + seq_k - seq_q):
         the same thing when seq_q == seq_k, wrong as soon as the queries are a chunk at the end of the keys.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day65_attention_materialised"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '                if causal and j > i + shift:\n',
        '                if causal and j > i:  # MISTAKE: top-left; bottom-right is j > i + seq_k - seq_q\n',
    ),
    (
        '                    masked = j >= kend or (causal and j > i + shift)\n',
        '                    masked = j >= kend or (causal and j > i)  # MISTAKE: top-left\n',
    ),
]
