"""Day 89, deliberately wrong: day89_tuning_paged_attention.py with one classic mistake.

MISTAKE: tuned_partition counts one block per (sequence, query head), as before day 79: with four heads
         per block the grid gets a quarter of the blocks it aimed for, and the long-context batch stays
         starved.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day89_tuning_paged_attention"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '    blocks = num_seqs * num_heads // heads  # per partition: seqs x KV heads x chunks of each group\n',
        '    blocks = num_seqs * num_heads  # per partition: one per (sequence, head)\n',
    ),
]
