"""Day 80, deliberately wrong: day80_page_layouts.py with one classic mistake.

MISTAKE: the vectorized layout's chunk stride is counted in elements (block_size * x) where the kernel addresses 32-bit
         words (block_size * 16 B / 4): right for fp32, where x = 4 elements = 4 words, but twice too far for
         fp16, so chunk j of a row is read from another head's (or another page's) slab.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day80_page_layouts"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '    CHUNK_STRIDE = BS * CHUNK_WORDS if VECTORIZED else CHUNK_WORDS\n',
        '    CHUNK_STRIDE = BS * (CHUNK_BYTES // np.dtype(cache_dtype).itemsize) if VECTORIZED else CHUNK_WORDS\n',
    ),
]
