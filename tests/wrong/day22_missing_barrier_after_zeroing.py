"""Day 22, deliberately wrong: day22_histogram.py with one classic mistake.

MISTAKE: no barrier between zeroing the shared bins and counting into them: a thread may count into a
         bin that another thread zeroes afterwards (the simulator names the race).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day22_histogram"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    cuda.syncthreads()  # the zeroing must land before any thread counts into another thread's bin\n",
        "    # MISTAKE: no cuda.syncthreads() here\n",
    ),
]
