"""Day 77, deliberately wrong: day77_reshape_and_cache.py with one classic mistake.

MISTAKE: the optimized kernel treats slots as 1-based (slot - 1), so every token lands one row early: in the previous
         offset of its page, or in the last row of the previous page.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day77_reshape_and_cache"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '    slot = slot_mapping[t]  # one address for the whole block: a single broadcast load\n',
        '    slot = slot_mapping[t] - 1  # MISTAKE: slots are 0-based (page * block_size + offset)\n',
    ),
]
