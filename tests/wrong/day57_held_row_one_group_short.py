"""Day 57, deliberately wrong: day57_softmax_rows.py with one classic mistake.

MISTAKE: the warp kernel's held-row buffer is one 16-byte group short (sized for the row's full groups
         a lane, not for its last, partial one): the lane's last group, the row's tail, is written past
         the end of the buffer. On a GPU that is local memory out of bounds (another variable, or
         garbage); the simulator names the index.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day57_softmax_rows"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "        buf = cuda.local.array(held, float32)  # constant size, constant indices: registers\n",
        "        buf = cuda.local.array(held - VEC, float32)  # MISTAKE: one group short for the tail\n",
    ),
]
