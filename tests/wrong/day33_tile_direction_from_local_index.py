"""Day 33, deliberately wrong: day33_bitonic_sort.py with one classic mistake.

MISTAKE: the tile sort takes its direction from the tile-local index: every tile comes out ascending,
         so the first stage longer than a tile merges two ascending runs (not a bitonic sequence).
         Only sizes above one tile show it.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day33_bitonic_sort"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "                    if (a > b) == (((base + lo) & k) == 0):\n",
        "                    if (a > b) == ((lo & k) == 0):  # MISTAKE: the tile's index, not the array's\n",
    ),
]
