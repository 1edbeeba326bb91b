"""Day 82, deliberately wrong: day82_prefix_sharing.py with one classic mistake.

MISTAKE: fork shares every page, the partially filled last one too: both owners then append their next tokens into the
         same page, and the second write clobbers the first.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day82_prefix_sharing"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        partial = n % self.block_size != 0  # both owners will append into this page: it cannot be shared\n',
        '        partial = False  # the partly filled last page is shared like the full ones\n',
    ),
]
