"""Day 06, deliberately wrong: day06_conv1d_registers.py with one classic mistake.

MISTAKE: every lane sends its inputs of this row, whichever lane reads them: the lanes near the warp's end, whose
         taps run past lane 31 and wrap to lane 0, get inputs from the same row instead of the next one.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day06_conv1d_registers"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        'cuda.shfl_sync(FULL_MASK, here if lane >= d else next_row, src)',
        'cuda.shfl_sync(FULL_MASK, here, src)',
    ),
]
