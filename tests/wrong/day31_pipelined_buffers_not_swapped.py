"""Day 31, deliberately wrong: day31_stream_compaction.py with one classic mistake.

MISTAKE: v6 (pipelined) calls its second step with the register arrays in the same roles as the
         first: the step compacts `a` again (the tile it has just stored, still there) and loads the
         next tile into `b`, over the one it was meant to compact. The double buffer never swaps, so
         every block's second, fourth, ... tile writes its predecessor's kept elements.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day31_stream_compaction"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "        nb, na, nt = pipe_step(x, threshold, status, counter, out, b, a, tile, before, aggregate, following,\n",
        "        nb, na, nt = pipe_step(x, threshold, status, counter, out, a, b, tile, before, aggregate, following,  # MISTAKE\n",
    ),
]
