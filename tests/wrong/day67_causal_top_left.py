"""Day 67, deliberately wrong: day67_flash_attention_tensor_cores.py with one classic mistake.

MISTAKE: the causal mask aligned top-left (query i sees keys j <= i) instead of bottom-right (j <= i +
         seq_k - seq_q), in both kernels: the same whenever seq_q == seq_k, wrong when a chunk of 5
         queries attends 70 keys (they should see nearly all) or 70 queries attend 9 (the first 61
         should see none, and be zeros).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day67_flash_attention_tensor_cores"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "                        if key >= seq_k or (causal and key > row0 + r + shift):\n",
        "                        if key >= seq_k or (causal and key > row0 + r):  # MISTAKE: top-left\n",
    ),
    (
        "const bool dead = key >= si.seq_k || (CAUSAL && key > rows[e >> 1] + si.seq_k - si.seq_q);",
        "const bool dead = key >= si.seq_k || (CAUSAL && key > rows[e >> 1]);  // MISTAKE: top-left",
    ),
]
