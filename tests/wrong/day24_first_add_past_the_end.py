"""Day 24, deliberately wrong: day24_reduction_sequential.py with one classic mistake.

MISTAKE: the first add guards only its first load: the last block's second element, THREADS past the first, is read
         whenever the first is inside x, so for any n that is not a multiple of 2 * THREADS (every odd n among
         them) it reads past the end of x: garbage on a GPU, an IndexError in the simulator.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day24_reduction_sequential"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '    b = x[j] if j < n else float32(0.0)\n',
        '    b = x[j] if i < n else float32(0.0)\n',
    ),
]
