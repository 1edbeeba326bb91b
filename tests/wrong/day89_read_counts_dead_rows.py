"""Day 89, deliberately wrong: day89_tuning_paged_attention.py with one classic mistake.

MISTAKE: the read-only walk adds every row it loads, the clamped re-reads of a page's last live row
         too: a sequence whose context ends inside a trip counts that row several times, as an
         attention that forgot to mask dead rows would weigh it.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day89_tuning_paged_attention"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '            if t0 + u * NG + grp < n_tok:  # the dead row\'s re-read adds nothing, as its p = 0 does\n',
        '            if t0 + u * NG + grp >= 0:  # every row loaded\n',
    ),
]
