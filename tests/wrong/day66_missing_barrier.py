"""Day 66, deliberately wrong: day66_flash_attention.py with one classic mistake.

MISTAKE: no barrier at the end of a tile: a fast warp stages the next K tile over kv_sh (and writes the next p over
         p_sh) while slower warps are still multiplying the current P by V.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day66_flash_attention"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '            cuda.syncthreads()  # between tiles: the next K tile overwrites kv_sh, the next p p_sh\n',
        '            pass  # MISTAKE: no barrier between tiles\n',
    ),
]
