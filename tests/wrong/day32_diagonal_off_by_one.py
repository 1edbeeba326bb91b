"""Day 32, deliberately wrong: day32_merge_path.py with one classic mistake.

MISTAKE: the diagonal search compares a[mid] with b[k - mid] instead of b[k - 1 - mid]: the cell one step off the
         anti-diagonal i + j = k, so the co-rank lands one element late (and reads past b's end on the last diagonal).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day32_merge_path"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        if a[mid] <= b[k - 1 - mid]:\n',
        '        if a[mid] <= b[k - mid]:  # MISTAKE: one step off the diagonal\n',
    ),
]
