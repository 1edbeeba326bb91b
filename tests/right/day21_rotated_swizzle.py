"""Day 21, written another correct way: day21_bank_conflicts.py with a rotation for a swizzle.

RIGHT: element (r, c) kept at tile[r, (c + r) % TILE] instead of tile[r, c ^ r]: a rotation is a permutation of
       each row too, and down a column the 32 lanes still land in 32 different banks; no padding.

The grader run against it must pass every test (.ci/prove_graders.py checks): it asserts the day's idea
(a column read in one wavefront from an unpadded tile), not the solution's xor.
"""

SOLUTION = "day21_bank_conflicts"
EDITS = [  # (text in the solution, what this version puts there)
    (
        "        tile[ty + j, tx ^ (ty + j)] = x[r, c]",
        "        tile[ty + j, (tx + ty + j) % TILE] = x[r, c]",
    ),
    (
        "            out[r, c] = tile[tx, (ty + j) ^ tx]",
        "            out[r, c] = tile[tx, (ty + j + tx) % TILE]",
    ),
]
