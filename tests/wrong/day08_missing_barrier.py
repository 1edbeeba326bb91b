"""Day 08, deliberately wrong: day08_shared_tiles_halo.py with one classic mistake.

MISTAKE: no barrier after staging the tile: a thread reads halo and window slots that its neighbours (other warps) may
         not have written yet.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day08_shared_tiles_halo"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '    cuda.syncthreads()  # the halo a thread reads was loaded by its neighbours\n',
        '    # MISTAKE: no cuda.syncthreads() here\n',
    ),
]
