"""Day 69, deliberately wrong: day69_gqa_attention.py with one classic mistake.

MISTAKE: a block's first query head taken as its group's first head (the K/V head times group), in
         both kernels: right while a group fits one block (groups 1 to 4), wrong for group 8 and
         above, whose group / 4 blocks then all compute heads 8 kv .. 8 kv + 3 and leave the other
         heads of the group unwritten.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day69_gqa_attention"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    h0 = cuda.blockIdx.y * hb\n",
        "    h0 = (cuda.blockIdx.y * hb) // group * group  # MISTAKE: the group's first head\n",
    ),
    (
        "    return BlockInfo{(int)blockIdx.z, (int)blockIdx.y * GROUP_HEADS, (int)blockIdx.x * BLOCK_ROWS};",
        "    return BlockInfo{(int)blockIdx.z, (int)blockIdx.y * GROUP_HEADS / p.group * p.group,  // MISTAKE\n"
        "                     (int)blockIdx.x * BLOCK_ROWS};",
    ),
]
