"""Day 88, deliberately wrong: day88_int8_kv_cache.py with one classic mistake.

MISTAKE: the fused kernel weights V with the key's scale (one scale per token for both caches).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day88_int8_kv_cache"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '                        s[u * HEADS + h] = p * vs[u]  # the V scale rides on the weight\n',
        '                        s[u * HEADS + h] = p * ks[u]  # the V scale rides on the weight\n',
    ),
]
