"""Day 67, deliberately wrong: day67_flash_attention_tensor_cores.py with one classic mistake.

MISTAKE: the online softmax rescales the running sum l by exp2(m_old - m_new) but not the running
         output O: every key tile's P V is added at its own tile's max, so once a later tile raises a
         row's max the earlier tiles weigh too much (by exp2 of the rise). Right whenever the row's
         max sits in its first tile (one tile of keys); wrong at 65 or 70 keys.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day67_flash_attention_tensor_cores"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "                            o[dn, e] *= alpha  # the running output rescaled to the new max\n",
        "                            pass  # MISTAKE: O not rescaled\n",
    ),
]
