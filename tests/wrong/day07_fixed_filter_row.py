"""Day 07, deliberately wrong: day07_constant_mask.py with one classic mistake.

MISTAKE: the constant bank is read at a row fixed when the kernel compiles (bank[0, j]) instead of the filter index
         passed at run time: the compiler folds the taps into the multiply-adds, and every filter but the first
         comes out as the first.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day07_constant_mask"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        m[j] = bank[which, j]\n',
        '        m[j] = bank[0, j]  # MISTAKE: the run-time index is ignored\n',
    ),
]
