"""Day 31, deliberately wrong: day31_stream_compaction.py with one classic mistake.

MISTAKE: the optimized version votes the three bits of each lane's count (0..4 kept in its float4) but
         adds the popcounts of the three ballots unweighted: a lane below with 2 or 3 kept counts as 1,
         one with 4 as 1. The lanes' first slots collide and leave holes: elements overwrite one
         another and part of out is never written.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day31_stream_compaction"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "        offs[r] = run + cuda.popc(b1 & below) + 2 * cuda.popc(b2 & below) + 4 * cuda.popc(b4 & below)\n",
        "        offs[r] = run + cuda.popc(b1 & below) + cuda.popc(b2 & below) + cuda.popc(b4 & below)  # MISTAKE\n",
    ),
]
