"""Day 50, deliberately wrong: day50_streams_overlap.py with one classic mistake.

MISTAKE: the chunk plan does not clip the last chunk to n, so the last launch runs past the end of
         the arrays whenever the chunk size does not divide n (on a GPU: a silent out-of-bounds read
         and write; the copies, being slices, are clipped and hide it).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day50_streams_overlap"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    return [(lo, min(lo + size, n)) for lo in range(0, n, size)]\n",
        "    return [(lo, lo + size) for lo in range(0, n, size)]\n",
    ),
]
