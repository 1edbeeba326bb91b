"""Day 44, deliberately wrong: day44_matmul_vectorized.py with one classic mistake.

MISTAKE: the float4 store of C taken for every whole tile without checking N % 4: in a row of C that
         is not a multiple of 4 floats long, row 1 starts 4 N bytes after row 0, not on 16 bytes, and
         a 16-byte store there is misaligned (on the GPU "misaligned address" stops the kernel and
         the context; the simulator raises MisalignedAccess naming the thread and the index). Right
         whenever N is a multiple of 4, as at 4096^3.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day44_matmul_vectorized"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '    if n % VEC == 0 and row0 + BM <= m and col0 + BN <= n:\n',
        '    if row0 + BM <= m and col0 + BN <= n:  # MISTAKE: N % 4 not checked\n',
    ),
]
