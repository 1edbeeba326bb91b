"""Day 08, deliberately wrong: day08_shared_tiles_halo.py with one classic mistake.

MISTAKE: the tile is staged from first - MASK_RADIUS + 1, one element late, so every window is shifted by one input.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day08_shared_tiles_halo"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '    base = first - MASK_RADIUS\n',
        '    base = first - MASK_RADIUS + 1  # MISTAKE: halo off by one\n',
    ),
]
