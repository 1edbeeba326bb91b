"""Day 85, deliberately wrong: day85_preemption.py with one classic mistake.

MISTAKE: the copy loop is unrolled four times but has no remainder loop: the last words of a page (all of a small one)
         never move.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day85_preemption"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        ('    while w < words:\n'
         '        dst[kv, d, w] = src[kv, s, w]\n'
         '        w += step\n'),
        '',
    ),
]
