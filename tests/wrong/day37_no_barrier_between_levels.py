"""Day 37, deliberately wrong: day37_bfs_frontier.py with one classic mistake.

MISTAKE: the single-block kernel has no cuda.syncthreads() after a level's expansion: thread 0 reads
         the next frontier's count and advances the shared (level, count) while other warps are still
         expanding (and still reading the old pair), so the count misses their enqueues and warps
         start the next level on a frontier that is not complete. The simulator's race check names
         the shared pair, written by thread 0 after other threads read it with no barrier between.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day37_bfs_frontier"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "        cuda.syncthreads()  # this level's expansion is done everywhere before the count is read\n",
        "",
    ),
]
