"""Day 66, deliberately wrong: day66_flash_attention.py with one classic mistake.

MISTAKE: the online softmax rescales the running sum l but not the running output: when a later key tile raises a
         row's max, what was accumulated at the old max keeps its old, too large, weight.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day66_flash_attention"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '                    acc[r, c] *= corr  # the online softmax',
        '                    acc[r, c] *= 1.0  # MISTAKE: should be corr; the online softmax',
    ),
]
