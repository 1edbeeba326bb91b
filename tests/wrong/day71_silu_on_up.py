"""Day 71, deliberately wrong: day71_fused_mlp.py with one classic mistake.

MISTAKE: the epilogue applies SiLU to the up projection instead of the gate, h = gate * silu(up)
         (both the Numba epilogue and the tensor-core one): the two halves of the packed tile read the
         wrong way round. A plausible-looking h of the right scale, far from the reference.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day71_fused_mlp"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "                    h[row, col] = float16(silu(gate) * up)  # half the columns computed, 2 bytes each\n",
        "                    h[row, col] = float16(gate * silu(up))  # MISTAKE: silu of the up half\n",
    ),
    (
        "    return g / (1.0f + __expf(-g)) * u;  // __expf: ex2.approx; g < -88 gives g / inf = -0\n",
        "    return u / (1.0f + __expf(-u)) * g;  // MISTAKE: silu of the up half\n",
    ),
]
