"""Day 23, written another way: day23_reduction_interleaved.py with a correct variant.

RIGHT: the interleaved test as a bit mask, (t & (2s - 1)) == 0, instead of the modulo t % (2s) == 0: the same live
       threads (scattered over every warp, the same divergence), one AND instead of a signed remainder.

The grader run against it must pass (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day23_reduction_interleaved"
EDITS = [  # (text in the solution, what the variant puts there)
    (
        '        if t % (2 * s) == 0:\n',
        '        if (t & (2 * s - 1)) == 0:\n',
    ),
]
