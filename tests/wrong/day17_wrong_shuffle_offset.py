"""Day 17, deliberately wrong: day17_warp_shuffles.py with one classic mistake.

MISTAKE: the shuffle tree starts at offset 8 instead of 16 (as if a warp had 16 lanes), so lanes 16-31 of every warp
         never reach lane 0 and half of each warp's partial sums are lost.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day17_warp_shuffles"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '    offset = WARP // 2\n',
        '    offset = WARP // 4\n',
    ),
]
