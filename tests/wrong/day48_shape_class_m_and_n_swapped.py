"""Day 48, deliberately wrong: day48_matmul_autotuning.py with one classic mistake.

MISTAKE: the shape class computed from (N, M, K) instead of (M, N, K): every square problem still gets
         its own configuration, but a tall problem (M large, N small) is looked up as a wide one and
         runs the configuration tuned for the transposed shape. Nothing is wrong in the output (every
         configuration is correct), only in the speed, so the grader checks which configuration a tall
         and a wide problem get.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day48_matmul_autotuning"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        'for side in (m, n, k))',
        'for side in (n, m, k))  # MISTAKE: M and N swapped',
    ),
]
