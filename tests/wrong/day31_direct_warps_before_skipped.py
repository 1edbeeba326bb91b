"""Day 31, deliberately wrong: day31_stream_compaction.py with one classic mistake.

MISTAKE: v5 (direct) stores each warp's kept elements from the tile's first slot, forgetting the kept
         elements of the warps before it in the tile: warp w overwrites warp 0's run, and the slots
         after the first warp's run stay poisoned. Every tile but one whose kept elements all sit in
         warp 0 comes out wrong.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day31_stream_compaction"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    dst = tile_sm[1] + before  # the warp's first slot in out\n    for j in range(DIRECT_ITEMS):\n",
        "    dst = tile_sm[1]  # MISTAKE: the warps before this one are forgotten\n    for j in range(DIRECT_ITEMS):\n",
    ),
]
