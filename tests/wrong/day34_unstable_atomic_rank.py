"""Day 34, deliberately wrong: day34_radix_sort.py with one classic mistake.

MISTAKE: ranks from one shared atomic per key on the warp's digit counter: every key gets a distinct slot
         and the digits come out grouped, but the order among equal digits is the order the atomics
         happen to land in, not the tile's order: the scatter is not stable, so an earlier pass's order
         is lost (sort_pairs gives equal keys' values back shuffled).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day34_radix_sort"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "        rank[j] = before + cuda.popc(below)\n",
        "        rank[j] = cuda.atomic.add(wcount, slot, 1)  # MISTAKE: whichever lane lands first ranks first\n",
    ),
    (
        "        if below == 0:  # the lowest peer claims popc(peers) places for all of them at once\n"
        "            before = cuda.atomic.add(wcount, slot, cuda.popc(peers))\n",
        "",
    ),
    (
        "        before = cuda.shfl_sync(FULL, before, cuda.ffs(peers) - 1)\n",
        "",
    ),
]
