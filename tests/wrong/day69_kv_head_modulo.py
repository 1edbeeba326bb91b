"""Day 69, deliberately wrong: day69_gqa_attention.py with one classic mistake.

MISTAKE: the block's K/V head taken as h0 % kv_heads (tile order) instead of h0 // group: right for
         MQA (one K/V head) and MHA, wrong as soon as there are two K/V heads and a group above 1
         (heads 0-1 and 2-3 over K/V heads 0 and 1: both blocks read K/V head 0).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day69_gqa_attention"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    return h0, h0 // group, cuda.blockIdx.x * (WARP_ROWS * WARPS // hb)\n",
        "    return h0, h0 % kv_heads, cuda.blockIdx.x * (WARP_ROWS * WARPS // hb)  # MISTAKE: h % kv_heads\n",
    ),
]
