"""Day 08, deliberately wrong: day08_shared_tiles_halo.py with one classic mistake.

MISTAKE: sixteen outputs a thread instead of fifteen: lane t reads tile word 16t + q, so the 32 lanes of a warp fall in
         two banks and each window read is 16 wavefronts (right answers, a 16-way bank conflict).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day08_shared_tiles_halo"
EDITS = [  # (text in the solution, what the mistake puts there)
    ("OUTPUTS_PER_THREAD = 15\n", "OUTPUTS_PER_THREAD = 16\n"),
]
