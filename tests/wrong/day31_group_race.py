"""Day 31, deliberately wrong: day31_stream_compaction.py with one classic mistake.

MISTAKE: no cuda.syncwarp() between copying a warp's staged group out and staging the next group
         into the same region: a fast lane overwrites words a slow lane of its warp has not copied
         yet. The lanes of a warp are not in lock-step (Volta and later), so this is a race; the
         simulator names the two lanes, the array and the index.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day31_stream_compaction"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "            cuda.syncwarp()  # every lane has copied group g - 1 out of the region\n",
        "            pass  # MISTAKE: no syncwarp: the region may still be being copied out\n",
    ),
]
