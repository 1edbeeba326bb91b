"""Day 28, written another way: day28_scan_brent_kung.py with a different correct kernel.

RIGHT: the shared index is swizzled instead of padded: element i lives in word i ^ ((i // 32) % 32), a permutation
       within each row of 32 words (no spare words). Every sweep level's lanes still land in 32 banks, so the grader
       must pass it (it asserts one wavefront per request, not the padding's formula).

The grader run against it must pass (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day28_scan_brent_kung"
EDITS = [  # (text in the solution, what the other way puts there)
    ("    return i + (i >> 5)\n", "    return i ^ ((i >> 5) & 31)  # xor swizzle: SPAN words suffice\n"),
]
