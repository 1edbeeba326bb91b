"""Day 73, deliberately wrong: day73_decode_attention.py with one classic mistake.

MISTAKE: the optimized kernel exponentiates raw logits (it never subtracts the running max), so a score above ~88
         overflows float32 to inf and the output becomes inf / inf = NaN.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day73_decode_attention"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '                    m_new = max(m_new, s[hh * TOK + u])\n',
        '                    m_new = float32(0.0)  # MISTAKE: should be the running max of the logits\n',
    ),
]
