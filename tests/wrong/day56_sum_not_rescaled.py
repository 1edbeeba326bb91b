"""Day 56, deliberately wrong: day56_softmax_online.py with one classic mistake.

MISTAKE: the online read pass adds the new terms exp(x - m_new) to a running sum that is not rescaled
         when the max grows (s + ... instead of s exp(m_old - m_new) + ...): the terms seen before a
         larger element stay measured against the old, smaller max, so the sum is too large.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day56_softmax_online"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "s = s * math.exp(m - b) + (ea + eb)",
        "s = s + (ea + eb)  # MISTAKE: should be s * math.exp(m - b) + ...",
    ),
    (
        "s = s * math.exp(m - b) + ((math.exp(a0 - b)",
        "s = s + ((math.exp(a0 - b)",
    ),
]
