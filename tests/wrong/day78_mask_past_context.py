"""Day 78, deliberately wrong: day78_paged_attention_v1.py with one classic mistake.

MISTAKE: the optimized kernel masks by page, not by context: it reads all block_size rows of the last page, past
         context_lens[s], so stale or garbage slots join the softmax.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day78_paged_attention_v1"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '            n_tok = min(BS, ctx - page * BS)\n            if t0 < n_tok:\n                base',
        '            n_tok = BS\n            if t0 < n_tok:\n                base',
    ),
]
