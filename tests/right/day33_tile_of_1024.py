"""Day 33, written another correct way: day33_bitonic_sort.py with tiles of 1024 keys.

RIGHT: a tile of 1024 keys (two pairs a thread): one more stage runs as global steps and a merge, so
       more launches and passes, but the same idea (every step inside a tile in shared memory). The
       grader checks that idea, not the tile's size.

The grader run against it must pass every test (.ci/prove_graders.py checks). COURSE_TARGET=<this file> grades
the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day33_bitonic_sort"
EDITS = [  # (text in the solution, what the variant puts there)
    (
        "TILE = 2048  # keys a block sorts in shared memory: 8 KB\n",
        "TILE = 1024  # keys a block sorts in shared memory: 4 KB\n",
    ),
]
