"""Day 31, deliberately wrong: day31_stream_compaction.py with one classic mistake.

MISTAKE: the block of the last tile writes its own kept count (the aggregate) to counter[1] instead
         of its inclusive prefix, so the host returns a view of the first few elements only: the
         result has the wrong length whenever x spans more than one tile.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day31_stream_compaction"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "                counter[1] = exclusive + aggregate\n",
        "                counter[1] = aggregate  # MISTAKE: the last tile's own count, not the total\n",
    ),
]
