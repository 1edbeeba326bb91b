"""Day 73, deliberately wrong: day73_decode_attention.py with one classic mistake.

MISTAKE: the optimized kernel treats row r as live while r <= end (the partition's end), so it also reads row end:
         the next partition's first row, counted twice, or at the context's end row ctx, which holds no token (NaN
         in the tests; stale data, another sequence's rows or past the allocation on a GPU).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day73_decode_attention"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '                row = min(t0 + u * NG + grp, end - 1)\n',
        '                row = min(t0 + u * NG + grp, end)  # MISTAKE: row end is one past the last live row\n',
    ),
    (
        '                    row = min(nxt + u * NG + grp, end - 1)\n',
        '                    row = min(nxt + u * NG + grp, end)  # MISTAKE: row end is one past the last live row\n',
    ),
    (
        '                    if t0 + u * NG + grp >= end:\n',
        '                    if t0 + u * NG + grp > end:\n',
    ),
]
