"""Day 66, deliberately wrong: day66_flash_attention.py with one classic mistake.

MISTAKE: the key loop visits only full 32-key tiles: the keys of a partial last tile are never seen (and a
         sequence shorter than a tile sees none).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day66_flash_attention"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        for k0 in range(0, kend, BK):\n',
        '        for k0 in range(0, kend - BK + 1, BK):  # MISTAKE: drops the partial last tile\n',
    ),
]
