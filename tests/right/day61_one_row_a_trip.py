"""Day 61, a correct variant: day61_rotary_embeddings.py written another way.

RIGHT: rotate_rows turns one row a trip instead of two (no unrolling): the same 16-byte loads and
       stores, the same cos and sin in registers, the same bytes; only the bytes in flight a thread
       (and so, perhaps, the speed on the GPU) differ.

The grader run against it must pass (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day61_rotary_embeddings"
EDITS = [  # (text in the solution, what the variant puts there)
    (
        "    while row + step < end:\n"
        "        # four independent 16-byte loads in flight: a store first would make the next row's loads wait\n"
        "        a, b = wide.load4(x, row, col), wide.load4(x, row, half + col)\n"
        "        a2, b2 = wide.load4(x, row + step, col), wide.load4(x, row + step, half + col)\n"
        "        a, b = rope_quads(a, b, c, s, neox)\n"
        "        a2, b2 = rope_quads(a2, b2, c, s, neox)\n"
        "        wide.store4(x, row, col, a)\n"
        "        wide.store4(x, row, half + col, b)\n"
        "        wide.store4(x, row + step, col, a2)\n"
        "        wide.store4(x, row + step, half + col, b2)\n"
        "        row += 2 * step\n"
        "    if row < end:\n"
        "        a, b = rope_quads(wide.load4(x, row, col), wide.load4(x, row, half + col), c, s, neox)\n"
        "        wide.store4(x, row, col, a)\n"
        "        wide.store4(x, row, half + col, b)\n",
        "    while row < end:  # one row a trip\n"
        "        a, b = rope_quads(wide.load4(x, row, col), wide.load4(x, row, half + col), c, s, neox)\n"
        "        wide.store4(x, row, col, a)\n"
        "        wide.store4(x, row, half + col, b)\n"
        "        row += step\n",
    ),
]
