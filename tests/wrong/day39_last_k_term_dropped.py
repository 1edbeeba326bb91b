"""Day 39, deliberately wrong: day39_matmul_naive.py with one classic mistake.

MISTAKE: the k loop stops one term early (range(K - 1)): each output is off by one product a_ik b_kj,
         about 1/sqrt(K) of C's scale; the sqrt(K)-scaled float32 tolerance is far below that.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day39_matmul_naive"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '            for k in range(k_dim):\n',
        '            for k in range(k_dim - 1):  # MISTAKE: the last term dropped\n',
    ),
]
