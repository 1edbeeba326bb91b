"""Day 86, deliberately wrong: day86_continuous_batching.py with one classic mistake.

MISTAKE: admission runs before growth, so a request admitted this step (whose pages already hold this step's token) is
         appended to again: its first output attends over one token too many.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day86_continuous_batching"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        ("        # Grow every running request by this step's token, oldest first; when no page is left, the\n"
         '        # newest request is preempted (its pages freed, recomputed on readmission), maybe itself.\n'),
        '',
    ),
    (
        ('        for r in list(self.running):\n'
         '            while r in self.running:\n'
         '                try:\n'
         '                    slot = self.manager.append_slot(r)\n'
         '                except OutOfBlocksError:\n'
         '                    self._preempt(self.running[-1])\n'
         '                    continue\n'
         '                writes.append((r, self.manager.num_tokens(r) - 1, slot))\n'
         '                break\n'),
        '',
    ),
    (
        '            self.running.append(r)\n',
        ('            self.running.append(r)\n'
         "        # Grow every running request by this step's token, oldest first; when no page is left, the\n"
         '        # newest request is preempted (its pages freed, recomputed on readmission), maybe itself.\n'
         '        for r in list(self.running):\n'
         '            while r in self.running:\n'
         '                try:\n'
         '                    slot = self.manager.append_slot(r)\n'
         '                except OutOfBlocksError:\n'
         '                    self._preempt(self.running[-1])\n'
         '                    continue\n'
         '                writes.append((r, self.manager.num_tokens(r) - 1, slot))\n'
         '                break\n'),
    ),
]
