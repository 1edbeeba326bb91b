"""Day 62, deliberately wrong: day62_embedding_gather.py with one classic mistake.

MISTAKE: the 16-byte kernel copies quads two at a time and forgets the odd one out: a lane whose row
         has an odd number of quads left for it (a row of 4 floats, of 128, ...) never copies its last
         quad, so those 16 bytes of the row stay the poison.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day62_embedding_gather"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "                if q < nq:  # the last quad of the lane in each row\n",
        "                if False:  # MISTAKE: the lane's last single quad is never copied\n",
    ),
]
