"""Day 47, deliberately wrong: day47_matmul_tensor_cores.py with one classic mistake.

MISTAKE: B's fragments loaded with ldmatrix without .trans: B's shared tile is (K, N) row-major, so the
         untransposed load hands lane l two consecutive columns n of one k row, where the mma's "col"
         B fragment wants two consecutive k of one column: every mma multiplies by B's 8 x 8 blocks
         transposed. It builds, runs and stays in bounds; the GPU tests see wrong sums, and the nvcc
         test sees no .trans in the PTX.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day47_matmul_tensor_cores"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\\n"\n',
        '    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\\n"  // MISTAKE: no .trans\n',
    ),
]
