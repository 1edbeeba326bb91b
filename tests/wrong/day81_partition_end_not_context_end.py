"""Day 81, deliberately wrong: day81_paged_attention_v2.py with one classic mistake.

MISTAKE: tokens are counted to the partition's end, not the context's: the last partition's last page is read whole,
         past context_lens[s], so stale or garbage rows join its softmax.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day81_paged_attention_v2"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '            n_tok = min(block_size, ctx - page * block_size)\n',
        '            n_tok = min(block_size, (first + part_pages) * block_size - page * block_size)\n',
    ),
]
