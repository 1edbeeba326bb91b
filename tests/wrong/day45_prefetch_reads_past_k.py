"""Day 45, deliberately wrong: day45_matmul_double_buffering.py with one classic mistake.

MISTAKE: the prefetch of the next k step loaded without its k guard: at the last step (and in a
         partial one) the float4 loads a[i, k0 + 16 + ...] and b[k0 + 16 + ..., j] run past K4 and K
         (on the GPU, into the next row of A and past the end of B; the simulator raises OutOfBounds
         naming the index). The prefetch runs one step ahead, so its guard is the one that matters
         even where nothing is stored afterwards.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day45_matmul_double_buffering"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '            if i < m and ka < k_dim:  # K4 is a multiple of 4',
        '            if i < m:  # MISTAKE: no k guard on the prefetch',
    ),
    (
        '            if kb < k_rows and j < n_pad:\n                b_next[s * VEC], b_next[s * VEC + 1], b_next[s * VEC + 2], b_next[s * VEC + 3] = (\n',
        '            if j < n_pad:  # MISTAKE: no k guard on the prefetch\n                b_next[s * VEC], b_next[s * VEC + 1], b_next[s * VEC + 2], b_next[s * VEC + 3] = (\n',
    ),
]
