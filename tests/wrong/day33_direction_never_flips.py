"""Day 33, deliberately wrong: day33_bitonic_sort.py with one classic mistake.

MISTAKE: the global step takes its direction from bit j of the index instead of bit k: lo always has
         bit j clear, so every pair is put in ascending order, the descending runs never form, and a
         stage merges two ascending runs, which is not a bitonic sequence.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day33_bitonic_sort"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "        ascending = (lo & k) == 0  # runs of the stage alternate: bit k of the index says which way\n",
        "        ascending = (lo & j) == 0  # MISTAKE: bit j, always clear in lo: never descending\n",
    ),
]
