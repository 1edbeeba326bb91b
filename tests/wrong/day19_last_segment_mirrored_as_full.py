"""Day 19, deliberately wrong: day19_shared_staging.py with one classic mistake.

MISTAKE: the last, partial segment mirrored about a full segment's middle (seg[SEGMENT - 1 - s]) instead of its own
         (seg[L - 1 - s]): it reads slots that were never loaded.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day19_shared_staging"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '                out[base + s] = seg[length - 1 - s]\n',
        '                out[base + s] = seg[SEGMENT - 1 - s]  # MISTAKE: the full segment\'s mirror\n',
    ),
]
