"""Day 09, deliberately wrong: day09_conv2d_const_shared.py with one classic mistake.

MISTAKE: the span starts MASK_RADIUS - 1 rows above the tile instead of MASK_RADIUS, so every window is read one image
         row too low.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day09_conv2d_const_shared"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '    span_row0 = row0 - MASK_RADIUS  # the span starts one radius up and left of it\n',
        '    span_row0 = row0 - MASK_RADIUS + 1  # MISTAKE: halo off by one\n',
    ),
]
