"""Day 45, deliberately wrong: day45_matmul_double_buffering.py with one classic mistake.

MISTAKE: the padded stride used where the A tile is stored (rows of 132 floats) but not where its
         fragments are loaded (kk * 128, the unpadded row): every kk > 0 reads its A column 4 kk words
         early, part of it the previous row's padding that nothing wrote. Every index is in bounds and
         16-byte aligned, so nothing faults: the values are wrong (right only when K <= 1, the kk = 0 row).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day45_matmul_double_buffering"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        'wide.load4(a_tile, a_base + kk * A_STRIDE + ty * VEC)',
        'wide.load4(a_tile, a_base + kk * BM + ty * VEC)  # MISTAKE: unpadded stride',
    ),
    (
        'wide.load4(a_tile, a_base + kk * A_STRIDE + HALF + ty * VEC)',
        'wide.load4(a_tile, a_base + kk * BM + HALF + ty * VEC)  # MISTAKE: unpadded stride',
    ),
]
