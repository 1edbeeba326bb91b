"""Day 52, deliberately wrong: day52_unified_memory.py with one classic mistake.

MISTAKE: the read-mostly advice goes on y, the array the kernel writes: every write to a read-mostly
         page invalidates its other copies, so the advice costs instead of helping (and x gets none).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day52_unified_memory"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    rt.memAdvise(address(mx), mx.nbytes, rt.cudaMemAdviseSetReadMostly, dev)\n    # Bulk",
        "    rt.memAdvise(address(my), my.nbytes, rt.cudaMemAdviseSetReadMostly, dev)\n    # Bulk",
    ),
]
