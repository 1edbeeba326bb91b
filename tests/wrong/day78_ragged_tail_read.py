"""Day 78, deliberately wrong: day78_paged_attention_v1.py with one classic mistake.

MISTAKE: the optimized kernel loads every word slot of a ragged row (head_dim 80, 112, 120 in fp16):
         the last slot of lanes gl >= ROW_WORDS % G reads past the row, into the next KV head's row
         or the next token slot (NaN where no sequence owns it, and past the cache's end at its last
         row). q is 0 there, but 0 * NaN is NaN.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day78_paged_attention_v1"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "                        if w < FULL or gl < TAIL:  # a dead slot reads nothing: zeros add nothing\n",
        "                        if True:  # every slot, the dead ones too\n",
    ),
]
