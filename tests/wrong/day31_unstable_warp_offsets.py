"""Day 31, deliberately wrong: day31_stream_compaction.py with one classic mistake.

MISTAKE: warp-aggregated atomics without the scan: each warp takes its place in the tile from a shared
         counter (cuda.atomic.add) instead of the scan of the warp counts. The tile keeps the right
         elements, in the order the warps reached the counter: the compaction is no longer stable.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day31_stream_compaction"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "        tile_sm[0] = int32(cuda.atomic.add(status, tiles, uint64(1)))\n",
        "        tile_sm[0] = int32(cuda.atomic.add(status, tiles, uint64(1)))\n"
        "        tile_sm[2] = 0  # MISTAKE: a running count the warps claim their places from\n",
    ),
    (
        "            counts[k * WARPS + warp] = cuda.popc(m)  # one shared store a warp, not one atomic a lane\n",
        "            counts[k * WARPS + warp] = cuda.atomic.add(tile_sm, 2, cuda.popc(m))  # MISTAKE: arrival order\n",
    ),
    (
        "        aggregate = scan_counts(counts, lane)\n        if lane == 0:\n            tile_sm[2] = aggregate\n",
        "        aggregate = tile_sm[2]  # MISTAKE: no scan: the offsets are already the atomics' returns\n"
        "        if lane == 0:\n",
    ),
]
