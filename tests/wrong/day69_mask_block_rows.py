"""Day 69, deliberately wrong: day69_gqa_attention.py with one classic mistake.

MISTAKE: the causal mask of the Numba kernel still computed from day 67's row numbering (the block's
         row0 plus the row's index 16 warp + ...) although a warp now takes another head of the same
         16 positions: warps 1-3 mask as if their rows were 16, 32, 48 positions further on, and see
         keys past their window.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day69_gqa_attention"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '"(causal and key > wrow0 + r - warp * WARP_ROWS + shift)"',
        '"(causal and key > row0 + r + shift)"',
    ),
]
