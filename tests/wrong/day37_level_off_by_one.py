"""Day 37, deliberately wrong: day37_bfs_frontier.py with one classic mistake.

MISTAKE: the frontier's neighbours get level + 2 (the distance counted from 1 after the source), so
         every level past the source is one too high.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day37_bfs_frontier"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    next_level = int32(level + 1)\n",
        "    next_level = int32(level + 2)\n",
    ),
]
