"""Day 37, deliberately wrong: day37_bfs_frontier.py with one classic mistake.

MISTAKE: a claimant's slot is base + popc(votes) - 1 (the warp's count, not the claimants below it),
         so every claimant of a warp writes the same slot of the next frontier: all but one of them
         are lost, and the slots after it keep whatever the queue held.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day37_bfs_frontier"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "            pos = base + cuda.popc(votes & cuda.lanemask_lt())\n",
        "            pos = base + cuda.popc(votes) - 1\n",
    ),
]
