"""Day 88, deliberately wrong: day88_int8_kv_cache.py with one classic mistake.

MISTAKE: the fused kernel unpacks each byte as unsigned (0..255): it drops the sign flip, so negative values come out
         256 too large.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day88_int8_kv_cache"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '                        x = kbuf[u * WL + w] ^ uint32(0x80808080)\n',
        '                        x = kbuf[u * WL + w]\n',
    ),
    (
        '                            part += q[h * VEC + e] * (f[e] - float32(MAGIC))\n',
        '                            part += q[h * VEC + e] * (f[e] - float32(8388608.0))\n',
    ),
    (
        '                        x = vbuf[u * WL + w] ^ uint32(0x80808080)\n',
        '                        x = vbuf[u * WL + w]\n',
    ),
    (
        '                        val = f[e] - float32(MAGIC)  # unpacked once, used by every head\n',
        '                        val = f[e] - float32(8388608.0)  # unpacked once, used by every head\n',
    ),
]
