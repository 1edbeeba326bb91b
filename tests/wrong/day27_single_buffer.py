"""Day 27, deliberately wrong: day27_scan_kogge_stone.py with one classic mistake.

MISTAKE: Kogge-Stone in a single buffer with one barrier a step: thread t reads buf[t - d] while thread t - d
         overwrites it with its own sum in the same step (the read/write race the second buffer removes).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day27_scan_kogge_stone"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "        dst = THREADS - src  # the other half: this step writes nothing that this step reads\n",
        "        dst = src  # MISTAKE: one buffer: this step writes the words this step reads\n",
    ),
]
