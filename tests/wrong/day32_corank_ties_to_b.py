"""Day 32, deliberately wrong: day32_merge_path.py with one classic mistake.

MISTAKE: the co-rank search compares a[mid] < b[k - 1 - mid] instead of <=: a tie counts as b's element first, so the
         merge is no longer stable (and the partition kernel, which uses it, disagrees with the in-tile search on
         where a run of ties splits). Every value is still right on random data; -0.0 against +0.0 shows it.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day32_merge_path"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        if a[mid] <= b[k - 1 - mid]:\n',
        '        if a[mid] < b[k - 1 - mid]:  # MISTAKE: ties go to b\n',
    ),
]
