"""Day 78, deliberately wrong: day78_paged_attention_v1.py with one classic mistake.

MISTAKE: the optimized kernel's softmax never subtracts the running max: exp(logit) overflows float32 for logits above
         ~88 and the output becomes inf / inf = NaN.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day78_paged_attention_v1"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        m = float32(NO_LOGIT)\n',
        '        m = float32(0.0)\n',
    ),
    (
        '                    m_new = max(m_new, s[u])\n',
        '',
    ),
]
