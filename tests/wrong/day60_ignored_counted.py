"""Day 60, deliberately wrong: day60_cross_entropy.py with one classic mistake.

MISTAKE: the ignored tokens (-100) are counted in the mean: n_valid becomes the number of tokens, so
         the loss is divided by too many and every gradient row is too small by n_valid / tokens
         (what a hand-written mean over the per-token terms does when it divides by len(targets)).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day60_cross_entropy"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    while i < targets.size:\n        if targets[i] != IGNORE_INDEX:\n            count += float32(1.0)\n",
        "    while i < targets.size:\n        count += float32(1.0)  # MISTAKE: only targets != IGNORE_INDEX count\n",
    ),
]
