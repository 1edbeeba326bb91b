"""Day 32, deliberately wrong: day32_merge_path.py with one classic mistake.

MISTAKE: no barrier between staging the tile and searching it: a thread's co-rank search and merge read slots that
         threads of other warps load, which may not have happened yet (the simulator names the race).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day32_merge_path"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '    cuda.syncthreads()  # a thread\'s outputs come from slots that other warps loaded\n',
        '    # MISTAKE: no cuda.syncthreads() here\n',
    ),
]
