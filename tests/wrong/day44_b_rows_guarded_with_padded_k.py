"""Day 44, deliberately wrong: day44_matmul_vectorized.py with one classic mistake.

MISTAKE: B's k guard against the padded K4 (A's columns, a multiple of 4) instead of B's own K rows:
         only A is padded along k, so when K is not a multiple of 4 the last k step's float4 loads
         of B read rows K .. K4 - 1, past the end of B (on the GPU into whatever follows it, or a
         fault; the simulator names the index). The edge tile that reads past K, padded edition.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day44_matmul_vectorized"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        if kb < k_rows and j < n_pad:\n',
        '        if kb < k_dim and j < n_pad:  # MISTAKE: K4, not B\'s K rows\n',
    ),
]
