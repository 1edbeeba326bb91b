"""Day 65, deliberately wrong: day65_attention_materialised.py with one classic mistake.

MISTAKE: no barrier after the scores of a K tile: a fast warp stages the next K tile (or the first V tile) over
         kv_sh while slower warps are still reading the current one.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day65_attention_materialised"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '            cuda.syncthreads()  # the next tile overwrites kv_sh\n',
        '            pass  # MISTAKE: no barrier before the next tile overwrites kv_sh\n',
    ),
]
