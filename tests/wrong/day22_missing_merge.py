"""Day 22, deliberately wrong: day22_histogram.py with one classic mistake.

MISTAKE: the optimized kernel counts into its shared bins but never merges them: the global bins stay
         as the host zeroed them.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day22_histogram"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "            cuda.atomic.add(hist, t, total)  # one global atomic per bin per block\n",
        "            pass  # MISTAKE: the block's bins are never added to hist\n",
    ),
]
