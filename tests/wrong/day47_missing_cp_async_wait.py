"""Day 47, deliberately wrong: day47_matmul_tensor_cores.py with one classic mistake.

MISTAKE: no cp.async.wait_group before the barrier: __syncthreads() orders the threads, not their
         asynchronous copies, so the warps read a stage whose copies may still be in flight (old tiles,
         or zeros and garbage): wrong now and then on the GPU, depending on timing. The nvcc test sees no
         wait_group in the PTX.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day47_matmul_tensor_cores"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        cp_async_wait<STAGES - 2>();  // all but the newest group done: tile kt is in (this thread\'s part)\n',
        '        // MISTAKE: no cp_async_wait before the barrier\n',
    ),
    (
        '    cp_async_wait<0>();  // nothing is left in flight (the last groups are empty), but leave none\n',
        '',
    ),
]
