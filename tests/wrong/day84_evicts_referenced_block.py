"""Day 84, deliberately wrong: day84_prefix_caching.py with one classic mistake.

MISTAKE: a hit on a freed cached page raises its ref count but leaves it on the LRU list, so a later eviction hands a
         page that a sequence still reads to another sequence.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day84_prefix_caching"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '            del self._lru[block]\n',
        '',
    ),
]
