"""Day 85, deliberately wrong: day85_preemption.py with one classic mistake.

MISTAKE: swap_in allocates page by page without first checking that the pool can take the whole group: running out
         halfway leaves half a group on the GPU.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day85_preemption"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        ('        if len(pages) > self.num_free_blocks:\n'
         '            raise OutOfBlocksError(f"swapping in {ids!r} needs {len(pages)} blocks, "\n'
         '                                   f"{self.num_free_blocks} are free")\n'),
        '',
    ),
]
