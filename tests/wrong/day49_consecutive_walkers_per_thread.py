"""Day 49, deliberately wrong: day49_memory_wall.py with one classic mistake.

MISTAKE: a thread's chains are consecutive walkers (t * chains + j) instead of one gridsize apart: the
         answer is right, but the 32 lanes of a warp read 32 different lines at every step.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day49_memory_wall"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "                p[j] = min(first + j * threads, walkers - 1)\n",
        "                p[j] = min(first - cuda.grid(1) + cuda.grid(1) * chains + j, walkers - 1)  # MISTAKE\n",
    ),
    (
        "                w = first + j * threads\n",
        "                w = first - cuda.grid(1) + cuda.grid(1) * chains + j\n",
    ),
]
