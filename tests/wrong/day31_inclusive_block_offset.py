"""Day 31, deliberately wrong: day31_stream_compaction.py with one classic mistake.

MISTAKE: the scan version takes block b's offset from the inclusive scan of the counts at b (which
         already counts block b's own kept elements) instead of at b - 1: each block writes one block's
         worth too far, past the end of the kept elements.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day31_stream_compaction"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    start = offsets[b - 1] if b > 0 else 0  # the carry between blocks: day 27's scan of the counts\n",
        "    start = offsets[b]  # MISTAKE: the inclusive scan at b counts block b itself\n",
    ),
]
