"""Day 26, deliberately wrong: day26_reduction_grid_stride.py with one classic mistake.

MISTAKE: no tail loop after the grid-stride trips: the words past the last full trip of eight strides are never
         added (at small sizes that is every word), so the sum comes out short.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day26_reduction_grid_stride"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    while i < m:  # the tail: fewer than eight strides of words left\n",
        "    while False:  # MISTAKE: the tail words are skipped\n",
    ),
]
