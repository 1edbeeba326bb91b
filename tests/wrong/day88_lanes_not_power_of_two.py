"""Day 88, deliberately wrong: day88_int8_kv_cache.py with one classic mistake.

MISTAKE: the fused kernel gives a row exactly head_dim / 8 lanes (10 at head_dim 80, 12 at 96): the
         shfl_xor butterfly over offsets G/2, ... then pairs lanes of different rows (xor 5 of lane 9
         is lane 12), and a warp of 32 lanes is not a whole number of rows.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day88_int8_kv_cache"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    G = 1\n    while G < LANES:\n        G *= 2\n",
        "    G = LANES\n",
    ),
]
