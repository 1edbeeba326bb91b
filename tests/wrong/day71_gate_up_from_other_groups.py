"""Day 71, deliberately wrong: day71_fused_mlp.py with one classic mistake.

MISTAKE: the epilogue pairs each gate column with the up column of another group of the packed
         layout (the Numba thread's next column pair, the tensor-core warp's other 32-column group):
         silu(g_c) * u_{c + 16}. Every h is a product of the right kinds of numbers, of the wrong
         columns.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day71_fused_mlp"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "                    up = acc[i * TN + 2 * p + 1]\n",
        "                    up = acc[i * TN + (2 * p + 3) % TN]  # MISTAKE: the next group's up\n",
    ),
    (
        "            store_h2(H, M, inter, r, c, swiglu(acc[mt][nt][0], acc[mt][nt + 2][0]),\n"
        "                     swiglu(acc[mt][nt][1], acc[mt][nt + 2][1]));\n"
        "            store_h2(H, M, inter, r + 8, c, swiglu(acc[mt][nt][2], acc[mt][nt + 2][2]),\n"
        "                     swiglu(acc[mt][nt][3], acc[mt][nt + 2][3]));\n",
        "            const int un = (nt + 6) & 7;  // MISTAKE: the other group's up\n"
        "            store_h2(H, M, inter, r, c, swiglu(acc[mt][nt][0], acc[mt][un][0]),\n"
        "                     swiglu(acc[mt][nt][1], acc[mt][un][1]));\n"
        "            store_h2(H, M, inter, r + 8, c, swiglu(acc[mt][nt][2], acc[mt][un][2]),\n"
        "                     swiglu(acc[mt][nt][3], acc[mt][un][3]));\n",
    ),
]
