"""Day 49, deliberately wrong: day49_memory_wall.py with one classic mistake.

MISTAKE: the loops in the wrong order: each chain walks all of its steps before the next chain starts,
         so the right answer comes back with one load in flight per thread, as in the naive kernel.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day49_memory_wall"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "            s = 0\n"
        "            while s < steps:\n"
        "                for j in range(chains):\n"
        "                    p[j] = nxt[p[j]]  # `chains` loads with no dependence between them: all in flight\n"
        "                s += 1\n",
        "            for j in range(chains):\n"
        "                s = 0\n"
        "                while s < steps:\n"
        "                    p[j] = nxt[p[j]]  # MISTAKE: chain j + 1 starts only when chain j has finished\n"
        "                    s += 1\n",
    ),
]
