"""Day 42, deliberately wrong: day42_matmul_1d_blocking.py with one classic mistake.

MISTAKE: the last 8-deep k step loaded without its k guard: when K is not a multiple of 8 the loads of
         a[i, k0 + t % 8] and b[k0 + t // 64, j] run past K (on the GPU into the next row of A and past
         the end of B; the simulator names the index) instead of filling the tiles with zeros there.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day42_matmul_1d_blocking"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        if i < m and ka < k_dim:\n',
        '        if i < m:  # MISTAKE: no k guard\n',
    ),
    (
        '        if kb < k_dim and j < n:\n',
        '        if j < n:  # MISTAKE: no k guard\n',
    ),
]
