"""Day 49, deliberately wrong: day49_memory_wall.py with one classic mistake.

MISTAKE: an off-by-one in the step loop: every chain stops one load short, and the index it returns is
         the one before the last.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day49_memory_wall"
EDITS = [  # (text in the solution, what the mistake puts there)
    ("            while s < steps:\n", "            while s < steps - 1:  # MISTAKE: one step short\n"),
]
