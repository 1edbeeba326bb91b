"""Day 84, deliberately wrong: day84_prefix_caching.py with one classic mistake.

MISTAKE: the block key hashes the block's tokens alone, not its parent's key: two prefixes ending in the same tokens
         fight over one key, and the one that loses is never found again.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day84_prefix_caching"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '            h = self.hash_fn(h, tokens)\n',
        '            h = self.hash_fn(None, tokens)\n',
    ),
]
