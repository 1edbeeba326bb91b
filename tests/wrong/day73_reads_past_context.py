"""Day 73, deliberately wrong: day73_decode_attention.py with one classic mistake.

MISTAKE: the optimized kernel treats row r as live while r <= ctx, so it also reads row ctx, which holds no token
         (NaN in the tests; stale data, another sequence's rows or past the allocation on a GPU).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day73_decode_attention"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '                row = min(t0 + u * NG + grp, ctx - 1)\n',
        '                row = min(t0 + u * NG + grp, ctx)  # MISTAKE: row ctx is one past the last token\n',
    ),
    (
        '                if t0 + u * NG + grp >= ctx:\n',
        '                if t0 + u * NG + grp > ctx:\n',
    ),
]
