"""Day 88, deliberately wrong: day88_int8_kv_cache.py with one classic mistake.

MISTAKE: quantize takes the row's max instead of its max-abs: a row whose largest magnitude is negative clips it at
         -127 * scale.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day88_int8_kv_cache"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '            amax = max(amax, abs(float32(x[r, d])))\n',
        '            amax = max(amax, float32(x[r, d]))\n',
    ),
]
