"""Day 21, deliberately wrong: day21_bank_conflicts.py with one classic mistake.

MISTAKE: the swizzle written c | r instead of c ^ r: OR is not a permutation of a row (c = 1 and c = 0 both land
         on column 1 when r = 1), so elements overwrite each other in the tile and others are never stored.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day21_bank_conflicts"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "        tile[ty + j, tx ^ (ty + j)] = x[r, c]",
        "        tile[ty + j, tx | (ty + j)] = x[r, c]",
    ),
    (
        "            out[r, c] = tile[tx, (ty + j) ^ tx]",
        "            out[r, c] = tile[tx, (ty + j) | tx]",
    ),
]
