"""Day 74, deliberately wrong: day74_fragmentation_lab.py with one classic mistake.

MISTAKE: the optimized kernel writes the new tokens from row seq_lens[s] - 1, the index of the last token already held,
         so it overwrites that token and leaves the last new row unwritten.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day74_fragmentation_lab"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '    start = seq_lens[s] * row_words  # one address for the whole block: a broadcast load\n',
        '    start = (seq_lens[s] - 1) * row_words  # MISTAKE: seq_lens[s] is the first free row, not the last used\n',
    ),
]
