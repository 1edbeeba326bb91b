"""Day 67, deliberately wrong: day67_flash_attention_tensor_cores.py with one classic mistake.

MISTAKE: the key-tile loop counts whole 64-key tiles only (seq_k / 64, rounded down), in both kernels:
         the keys of the last, partial tile never enter the softmax (and seq_k < 64 sees no key at
         all: zeros). Right whenever seq_k is a multiple of 64.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day67_flash_attention_tensor_cores"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "        for n0 in range(0, seq_k, BLOCK_N):  # ceil(seq_k / 64) tiles: the last may be partial\n",
        "        for n0 in range(0, seq_k - BLOCK_N + 1, BLOCK_N):  # MISTAKE: whole tiles only\n",
    ),
    (
        "    return KeyTiles{0, (s.seq_k + BLOCK_N - 1) / BLOCK_N};\n",
        "    return KeyTiles{0, s.seq_k / BLOCK_N};  // MISTAKE: whole tiles only\n",
    ),
]
