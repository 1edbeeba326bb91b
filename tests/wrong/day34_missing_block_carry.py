"""Day 34, deliberately wrong: day34_radix_sort.py with one classic mistake.

MISTAKE: no carry between blocks: every block starts its digit-d keys at the first block's offset for d
         (scanned[d * blocks] - counts[d * blocks]) instead of its own entry of the scanned table, so the
         blocks' runs of one digit overwrite each other; right only while the keys fit one tile.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day34_radix_sort"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    g = d * blocks + b\n",
        "    g = d * blocks  # MISTAKE: block 0's offset for every block: the earlier blocks' keys not counted\n",
    ),
]
