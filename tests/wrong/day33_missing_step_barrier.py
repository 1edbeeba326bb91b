"""Day 33, deliberately wrong: day33_bitonic_sort.py with one classic mistake.

MISTAKE: no barrier between the tile sort's shared-memory steps: a step reads pairs whose keys other
         warps wrote in the step before, and may read them before they are written.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day33_bitonic_sort"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "            cuda.syncthreads()  # the next step's pairs mix the keys other warps just wrote\n",
        "            # MISTAKE: no cuda.syncthreads() between the steps\n",
    ),
]
