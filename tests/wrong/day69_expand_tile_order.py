"""Day 69, deliberately wrong: day69_gqa_attention.py with one classic mistake.

MISTAKE: the expansion copy repeats the K/V heads in tile order (query head h reads K/V head
         h % kv_heads, numpy's tile / torch's repeat) instead of repeat_interleave's h // group: heads
         0-3 over 2 K/V heads get 0, 1, 0, 1 instead of 0, 0, 1, 1. MQA and MHA cannot see it.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day69_gqa_attention"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "            h = kv * group + r  # repeat_interleave: heads kv group .. kv group + group - 1\n",
        "            h = r * kv_heads + kv  # MISTAKE: tile, not repeat_interleave\n",
    ),
]
