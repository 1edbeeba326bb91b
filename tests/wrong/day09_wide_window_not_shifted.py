"""Day 09, deliberately wrong: day09_conv2d_const_shared.py with one classic mistake.

MISTAKE: in the wide kernel every one of a thread's COLS outputs reads window columns 0 .. 4: the taps are not
         shifted by the output's column, so all COLS outputs of a thread are the first one's value.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day09_conv2d_const_shared"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '                            a += m[i, j] * win[i, cc + j]  # output cc\'s taps: window columns cc .. cc + 4\n',
        '                            a += m[i, j] * win[i, j]  # MISTAKE: not shifted by cc\n',
    ),
]
