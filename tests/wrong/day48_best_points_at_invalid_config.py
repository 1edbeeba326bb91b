"""Day 48, deliberately wrong: day48_matmul_autotuning.py with one classic mistake.

MISTAKE: a BEST entry copied by hand with a typo: warp tiles of 48 x 32 on a 128 x 128 block (128 is
         not a whole number of 48-row warp tiles, and a 48-row sub-tile has 12 lane rows, not 8).
         Day 46's asserts reject it when the variant is built, so every 4093 x 4099 x 1021-like
         problem (class "LLS") would fail at its first call on the GPU; the grader builds every
         entry of BEST.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day48_matmul_autotuning"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '    "LLS": DAY46,\n',
        '    "LLS": Config(128, 128, 16, 48, 32, 2, 2, 4, 4),  # MISTAKE: WM = 48\n',
    ),
]
