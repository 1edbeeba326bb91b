"""Day 37, deliberately wrong: day37_bfs_frontier.py with one classic mistake.

MISTAKE: the claim is a plain read then write of levels[u], not a compare-and-swap: two frontier
         vertices that share a neighbour both see -1 in the same level, both "win" and both enqueue it
         (the levels stay right, the next frontier holds the vertex twice and its work is done twice).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day37_bfs_frontier"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    return cuda.atomic.cas(levels, u, int32(-1), next_level) == -1\n",
        "    levels[u] = next_level\n    return True\n",
    ),
]
