"""Day 08, written another correct way: day08_shared_tiles_halo.py with a smaller tile.

RIGHT: 64 threads a block and 7 outputs a thread (7 is odd too: conflict-free window reads), 448 outputs a tile: the
       same kernel with a shared tile a quarter of the solution's size.

The grader run against it must pass every test (.ci/prove_graders.py checks): it asserts the day's idea
(a shared tile, a barrier, no local memory), not the solution's tile shape.
"""

SOLUTION = "day08_shared_tiles_halo"
EDITS = [  # (text in the solution, what this version puts there)
    (
        'TILE_THREADS = 128\n',
        'TILE_THREADS = 64\n',
    ),
    (
        '\nOUTPUTS_PER_THREAD = 15\n',
        '\nOUTPUTS_PER_THREAD = 7\n',
    ),
]
