"""Day 21, deliberately wrong: day21_bank_conflicts.py with one classic mistake.

MISTAKE: the 'padded' tile declared (TILE, TILE): no spare word a row, so a tile column's 32 words are 32 apart
         again and the column reads conflict 32 ways (the answer is still right: only the counts show it).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day21_bank_conflicts"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    tile = cuda.shared.array((TILE, PADDED_ROW), x.dtype)  # one spare word a row: row r starts at bank r % 32\n",
        "    tile = cuda.shared.array((TILE, TILE), x.dtype)  # MISTAKE: no padding\n",
    ),
]
