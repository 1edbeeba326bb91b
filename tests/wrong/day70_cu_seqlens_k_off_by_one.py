"""Day 70, deliberately wrong: day70_varlen_attention.py with one classic mistake.

MISTAKE: sequence b's keys are read from sequence b - 1's offset (cu_seqlens_k[b - 1] where
         cu_seqlens_k[b] belongs), in both kernels' piece (d); the lengths stay right. A batch of one
         sequence is unaffected; with two or more, every later sequence attends the previous one's
         keys and values (and the tail of its own range is never read).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day70_varlen_attention"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    k_row0 = cu_seqlens_k[b]\n    seq_q = cu_seqlens_q[b + 1] - q_row0\n    seq_k = cu_seqlens_k[b + 1] - k_row0\n",
        "    k_row0 = cu_seqlens_k[max(b - 1, 0)]  # MISTAKE: the previous sequence's offset\n"
        "    seq_q = cu_seqlens_q[b + 1] - q_row0\n    seq_k = cu_seqlens_k[b + 1] - cu_seqlens_k[b]\n",
    ),
    (
        "    const int q0 = p.cu_seqlens_q[batch], k0 = p.cu_seqlens_k[batch];\n"
        "    return SeqInfo{q0, k0, p.cu_seqlens_q[batch + 1] - q0, p.cu_seqlens_k[batch + 1] - k0};\n",
        "    const int q0 = p.cu_seqlens_q[batch], k0 = p.cu_seqlens_k[batch > 0 ? batch - 1 : 0];  // MISTAKE\n"
        "    return SeqInfo{q0, k0, p.cu_seqlens_q[batch + 1] - q0, p.cu_seqlens_k[batch + 1] - p.cu_seqlens_k[batch]};\n",
    ),
]
