"""Day 85, deliberately wrong: day85_preemption.py with one classic mistake.

MISTAKE: a page shared in the group is copied once, but its host page keeps ref count 1: freeing one owner hands the
         host page out while the other still holds it.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day85_preemption"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '                    self.cpu_allocator.incref(cpu_of[block])  # shared in the group: one copy, one more owner\n',
        '                    pass\n',
    ),
]
