"""Day 62, deliberately wrong: day62_embedding_gather.py with one classic mistake.

MISTAKE: the 4-byte kernel (rows whose length is not a multiple of 4 words: float32 hidden % 4 != 0)
         copies only its unrolled steps of two words a lane and drops the tail: the lane's last word of
         each row is never written (a row of up to 32 words is not copied at all), left as the poison.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day62_embedding_gather"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "            if c < words:  # the tail: the lane's last word of each row\n"
        "                a0 = table[src_a, c]\n"
        "                b0 = table[src_b, c]\n"
        "                out[dst_a, c] = a0\n"
        "                out[dst_b, c] = b0\n",
        "            # MISTAKE: no tail: the words past the last whole step are never copied\n",
    ),
]
