"""Day 79, deliberately wrong: day79_paged_attention_gqa.py with one classic mistake.

MISTAKE: heads_per_block takes min(group, MAX_GROUP) instead of the largest divisor of the group: group 6 splits
         4 + 2, so a block's four heads reach into the next KV head's group and the grid no longer covers the
         heads in whole blocks.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day79_paged_attention_gqa"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '    return max(h for h in range(1, min(group, limit) + 1) if group % h == 0)\n',
        '    return min(group, limit)\n',
    ),
]
