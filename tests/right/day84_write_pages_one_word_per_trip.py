"""Day 84, written another way: day84_prefix_caching.py with one correct change.

RIGHT: write_pages_kernel copies one 8-byte word per thread per trip instead of four loads in flight:
       slower on a GPU, the same pages written.

The grader run against it must pass every test (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day84_prefix_caching"
EDITS = [  # (text in the solution, what the change puts there)
    (
        ('    while w + 3 * step < words:\n'
         '        a0 = new_words[kv, src + w]\n'
         '        a1 = new_words[kv, src + w + step]\n'
         '        a2 = new_words[kv, src + w + 2 * step]\n'
         '        a3 = new_words[kv, src + w + 3 * step]\n'
         '        cache_words[kv, page, w] = a0\n'
         '        cache_words[kv, page, w + step] = a1\n'
         '        cache_words[kv, page, w + 2 * step] = a2\n'
         '        cache_words[kv, page, w + 3 * step] = a3\n'
         '        w += 4 * step\n'),
        '',
    ),
]
