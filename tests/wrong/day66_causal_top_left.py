"""Day 66, deliberately wrong: day66_flash_attention.py with one classic mistake.

MISTAKE: the causal mask is aligned top-left (query i sees keys j <= i) instead of bottom-right (j <= i + seq_k -
         seq_q): right only when seq_q == seq_k.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day66_flash_attention"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '                    if edge and (j >= kend or (causal and j > row + shift)):\n',
        '                    if edge and (j >= kend or (causal and j > row)):  # MISTAKE: top-left\n',
    ),
]
