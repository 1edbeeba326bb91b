"""Day 65, deliberately wrong: day65_attention_materialised.py with one classic mistake.

MISTAKE: the optimized kernel's K and V tile loops stop at the last FULL 32-key tile, so the keys of a partial last
         tile are never scored nor weighted (seq_k = 37 loses 5 keys; seq_k < 32 loses them all).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day65_attention_materialised"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        for k0 in range(0, kend, KT):  # K tiles: the scores\n',
        '        for k0 in range(0, kend - KT + 1, KT):  # MISTAKE: drops the partial last tile\n',
    ),
    (
        '        for k0 in range(0, kend, KT):  # V tiles: P v\n',
        '        for k0 in range(0, kend - KT + 1, KT):  # MISTAKE: drops the partial last tile\n',
    ),
]
