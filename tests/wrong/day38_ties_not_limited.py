"""Day 38, deliberately wrong: day38_checkpoint_topk.py with one classic mistake.

MISTAKE: every key equal to the threshold is gathered, not only the r with the smallest indices: more than
         k pairs are written (past the k-long survivor buffers), and which equal keys end up in the top k
         is left to whatever overwrote what.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day38_checkpoint_topk"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "            if e < r:  # only the r smallest indices among the keys equal to the threshold\n",
        "            if e < 2**31:  # MISTAKE: every equal key taken, not only the first r\n",
    ),
]
