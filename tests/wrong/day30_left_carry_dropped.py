"""Day 30, deliberately wrong: day30_checkpoint_summed_area.py with one classic mistake.

MISTAKE: the carry from the tiles to the left dropped: each tile's first column never gets the sum of its rows
         left of the tile, so every tile but the leftmost restarts the row sums (right for one tile column only).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day30_checkpoint_summed_area"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "                tile[r, 0] += left_t[tc - 1, r0 + r]  # the thread's own words: no barrier needed yet\n",
        "                pass  # MISTAKE: the row sums left of the tile never added\n",
    ),
]
