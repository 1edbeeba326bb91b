"""Day 53, deliberately wrong: day53_fusion_checkpointing.py with one classic mistake.

MISTAKE: the epilogue applies the GELU to the raw sums and adds the bias after it, GELU(z) + b instead
         of GELU(z + b): exact for the second GEMM (no GELU), off by ~0.1 of each hidden in the first.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day53_fusion_checkpointing"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "            acc[i * TN + j] += b_frag[j]  # the bias before the activation: GELU(z + b)\n"
        "    if apply_gelu:  # uniform across the grid: no divergence\n",
        "            pass\n"
        "    if apply_gelu:  # uniform across the grid: no divergence\n",
    ),
    (
        "                    c[row, col] = acc[i * TN + j]\n",
        "                    c[row, col] = acc[i * TN + j] + b_frag[j]  # MISTAKE: the bias after the GELU\n",
    ),
]
