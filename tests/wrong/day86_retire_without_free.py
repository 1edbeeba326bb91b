"""Day 86, deliberately wrong: day86_continuous_batching.py with one classic mistake.

MISTAKE: a finished request leaves the batch but its pages are never freed, so the pool drains and the scheduler stalls
         with requests waiting.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day86_continuous_batching"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        ('        for r in [r for r in self.running if self.done[r] == self.output_lens[r]]:\n'
         '            self.manager.free(r)\n'),
        '        for r in [r for r in self.running if self.done[r] == self.output_lens[r]]:\n',
    ),
]
