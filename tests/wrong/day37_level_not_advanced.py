"""Day 37, deliberately wrong: day37_bfs_frontier.py with one classic mistake.

MISTAKE: after a big level in the multi-block kernel the hybrid's host keeps the level it launched
         instead of advancing it: the next big launch expands the old level's queue with the new
         level's count (past the entries written: garbage vertex ids), and a switch back to the block
         starts on the counter the big launch cleared, an empty frontier, so the search stops with
         the rest of the graph unreached.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day37_bfs_frontier"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "            level, count = level + 1, int(host_words[(level + 1) % 2])\n",
        "            level, count = level, int(host_words[(level + 1) % 2])\n",
    ),
]
