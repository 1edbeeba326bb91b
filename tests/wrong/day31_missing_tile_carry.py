"""Day 31, deliberately wrong: day31_stream_compaction.py with one classic mistake.

MISTAKE: the carry between blocks is lost: every tile after the first publishes its prefix but copies
         its kept elements to out from offset 0 (the look-back's exclusive prefix is never used), so the
         tiles overwrite one another and the rest of out is never written.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day31_stream_compaction"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "            tile_sm[1] = exclusive\n",
        "            tile_sm[1] = 0  # MISTAKE: the tile's offset ignores the tiles before it\n",
    ),
]
