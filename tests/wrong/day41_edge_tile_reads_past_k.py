"""Day 41, deliberately wrong: day41_matmul_shared_tiles.py with one classic mistake.

MISTAKE: the last k tile loaded without its k guard: when K is not a multiple of 32, the loads of
         a[i, k0 + tx] and b[k0 + ty, j] run past K (on the GPU, into the next row of A and past the end of
         B; the simulator names the index), instead of filling the tiles with zeros there.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day41_matmul_shared_tiles"
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
