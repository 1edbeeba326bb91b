"""Day 41, deliberately wrong: day41_matmul_shared_tiles.py with one classic mistake.

MISTAKE: the loads guarded but the edge tiles not zero-filled: past K (and past M, N) the tiles keep the
         previous k step's values (or whatever shared memory held), and the unguarded inner loop adds
         them in.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day41_matmul_shared_tiles"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        else:\n            a_tile[ty, tx] = float32(0.0)  # past M or K: a zero that adds nothing\n',
        '        # MISTAKE: no zero fill past M or K\n',
    ),
    (
        '        else:\n            b_tile[ty, tx] = float32(0.0)  # past K or N\n',
        '        # MISTAKE: no zero fill past K or N\n',
    ),
]
