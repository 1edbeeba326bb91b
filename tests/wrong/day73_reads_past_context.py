"""Day 73, deliberately wrong: day73_decode_attention.py with one classic mistake.

MISTAKE: the optimized kernel treats token t as live while t <= ctx, so it also reads row ctx, which holds no token
         (NaN in the tests; stale data or another allocation on a GPU).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day73_decode_attention"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        ('        k1 = _row(key_cache, s, t1, g, lane, t1 < ctx)\n'
         '        k2 = _row(key_cache, s, t2, g, lane, t2 < ctx)\n'
         '        k3 = _row(key_cache, s, t3, g, lane, t3 < ctx)\n'),
        ('        # MISTAKE: `<= ctx` lets token ctx (one past the last) in\n'
         '        k1 = _row(key_cache, s, t1, g, lane, t1 <= ctx)\n'
         '        k2 = _row(key_cache, s, t2, g, lane, t2 <= ctx)\n'
         '        k3 = _row(key_cache, s, t3, g, lane, t3 <= ctx)\n'),
    ),
    (
        ('        v1 = _row(value_cache, s, t1, g, lane, t1 < ctx)\n'
         '        v2 = _row(value_cache, s, t2, g, lane, t2 < ctx)\n'
         '        v3 = _row(value_cache, s, t3, g, lane, t3 < ctx)\n'),
        ('        v1 = _row(value_cache, s, t1, g, lane, t1 <= ctx)\n'
         '        v2 = _row(value_cache, s, t2, g, lane, t2 <= ctx)\n'
         '        v3 = _row(value_cache, s, t3, g, lane, t3 <= ctx)\n'),
    ),
    (
        ('        s1 = _warp_dot(q, k1) if t1 < ctx else -math.inf  # a token past the context weighs exp(-inf) = 0\n'
         '        s2 = _warp_dot(q, k2) if t2 < ctx else -math.inf\n'
         '        s3 = _warp_dot(q, k3) if t3 < ctx else -math.inf\n'),
        ('        s1 = _warp_dot(q, k1) if t1 <= ctx else -math.inf  # a token past the context weighs exp(-inf) = 0\n'
         '        s2 = _warp_dot(q, k2) if t2 <= ctx else -math.inf\n'
         '        s3 = _warp_dot(q, k3) if t3 <= ctx else -math.inf\n'),
    ),
]
