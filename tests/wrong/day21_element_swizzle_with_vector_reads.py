"""Day 21, deliberately wrong: day21_bank_conflicts.py with one classic mistake.

MISTAKE: the optimized kernel keeps the swizzled kernel's element swizzle (column s ^ c) in its transposed tile:
         the mapping is a permutation, but it splits the 4 consecutive elements a 16-byte read needs across
         the row (s ^ c is not a multiple of 4): a misaligned wide access, which stops the kernel on a GPU.
         The swizzle must move whole 16-byte chunks (s ^ (c & 28)).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day21_bank_conflicts"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "            tile[q + uint32(i), r ^ q] = got[step, i]",
        "            tile[q + uint32(i), r ^ (q + uint32(i))] = got[step, i]",
    ),
    (
        "        v = wide.load4(tile, c, s ^ (c & uint32(28)))",
        "        v = wide.load4(tile, c, s ^ c)",
    ),
]
