"""Day 29, deliberately wrong: day29_scan_decoupled_lookback.py with one classic mistake.

MISTAKE: the status words are published with no cuda.threadfence() before them. Here flag and value share one
         atomic word, so a reader still sees both or neither; but the spec asks for the fence, and with the value
         in a word of its own (8-byte values, as CUB stores them) another SM could see the flag first. Neither the
         simulator (one block at a time, no memory model) nor the answers show it: the grader reads the PTX.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day29_scan_decoupled_lookback"
EDITS = [  # (text in the solution, what the mistake puts there)
    ("        cuda.threadfence()  # the word may be read by other SMs: order everything before it\n", ""),
    ("            cuda.threadfence()\n", ""),
]
