"""Day 89, deliberately wrong: day89_tuning_paged_attention.py with one classic mistake.

MISTAKE: the reduce is told the partition in pages, the unit launch_attention takes, not in tokens: it
         counts ceil(ctx / pages) partitions and merges ones that never ran (or lie past the array).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day89_tuning_paged_attention"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '                                                                   partition)\n',
        '                                                                   partition // block_size)\n',
    ),
]
