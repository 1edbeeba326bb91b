"""Day 32, written another correct way: day32_merge_path.py with smaller tiles.

RIGHT: 128 threads a block and 7 outputs a thread (7 is odd too: conflict-free parking), 896 outputs a tile: the same
       merge path with more, smaller tiles and more partition searches.

The grader run against it must pass every test (.ci/prove_graders.py checks): it asserts the day's idea
(a shared tile behind a barrier, coalesced traffic, no local memory), not the solution's tile shape.
"""

SOLUTION = "day32_merge_path"
EDITS = [  # (text in the solution, what this version puts there)
    (
        'MERGE_THREADS = 256\n',
        'MERGE_THREADS = 128\n',
    ),
    (
        '\nITEMS = 11\n',
        '\nITEMS = 7\n',
    ),
]
