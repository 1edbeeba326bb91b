"""Day 55, a correct variant: day55_fused_bias_gelu.py written another way.

RIGHT: the fused kernel's loop with one quad in flight a step instead of two (no unrolling): the same
       16-byte loads and stores, the same biases in registers, the same bytes; only the bytes in
       flight a thread (and so, perhaps, the speed on the GPU) differ.

The grader run against it must pass (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day55_fused_bias_gelu"
EDITS = [  # (text in the solution, what the variant puts there)
    (
        "        while q + threads < nq:\n"
        "            x0, x1, x2, x3 = wide.load4(x, 4 * q)\n"
        "            y0, y1, y2, y3 = wide.load4(x, 4 * (q + threads))\n"
        "            wide.store4(out, 4 * q, (gelu(x0 + b0, exact), gelu(x1 + b1, exact),\n"
        "                                     gelu(x2 + b2, exact), gelu(x3 + b3, exact)))\n"
        "            wide.store4(out, 4 * (q + threads), (gelu(y0 + b0, exact), gelu(y1 + b1, exact),\n"
        "                                                 gelu(y2 + b2, exact), gelu(y3 + b3, exact)))\n"
        "            q += 2 * threads\n"
        "        if q < nq:\n",
        "        while q < nq:  # one quad a step\n",
    ),
    (
        "                                     gelu(x2 + b2, exact), gelu(x3 + b3, exact)))\n"
        "    i = 4 * nq + t\n",
        "                                     gelu(x2 + b2, exact), gelu(x3 + b3, exact)))\n"
        "            q += threads\n"
        "    i = 4 * nq + t\n",
    ),
]
