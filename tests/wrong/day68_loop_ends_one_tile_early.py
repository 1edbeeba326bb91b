"""Day 68, deliberately wrong: day68_causal_attention.py with one classic mistake.

MISTAKE: the causal key loop ends one tile early: last // 64 tiles instead of last // 64 + 1 (the
         tile holding the last row's last key is its diagonal tile, and the loop's end is exclusive),
         in both kernels: the diagonal tile's keys never enter the softmax (a block of rows 0..63 at
         seq_q == seq_k visits no tile at all: zeros).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day68_causal_attention"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    return min(tiles, last // BLOCK_N + 1)\n",
        "    return min(tiles, last // BLOCK_N)  # MISTAKE: one tile early\n",
    ),
    (
        "    return KeyTiles{0, min(tiles, last / BLOCK_N + 1)};\n",
        "    return KeyTiles{0, min(tiles, last / BLOCK_N)};  // MISTAKE: one tile early\n",
    ),
]
