"""Day 51, deliberately wrong: day51_onchip_double_buffering.py with one classic mistake.

MISTAKE: one barrier a tile but only one buffer: the store of tile k + 1 lands in the slots that slower warps are still
         reading tile k from (a write-after-read race on shared memory).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day51_onchip_double_buffering"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        half = (k % 2) * TILE_WORDS\n',
        '        half = 0  # MISTAKE: one buffer, never switched\n',
    ),
]
