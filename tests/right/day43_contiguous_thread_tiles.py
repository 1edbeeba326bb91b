"""Day 43, right another way: day43_matmul_2d_blocking.py with SGEMM_CUDA's thread layout.

RIGHT: each thread's 8 x 8 outputs consecutive (rows 8 ty + i, columns 8 tx + j) instead of 16 apart:
       the same outer product from the same fragments and the same loads per FMA, but the fragment
       reads conflict (B 4-way: 16 addresses 8 words apart fall on 4 banks; A 2-way) and a warp's
       store spreads over 32 sectors. Correct and graded as correct; slower on the GPU (the lesson
       counts the wavefronts), the layout days 44-45 start from when they widen the loads.

COURSE_TARGET=<this file> grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day43_matmul_2d_blocking"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '                a_frag[i] = a_tile[(ty + i * THREAD_ROWS) * BK + kk]\n',
        '                a_frag[i] = a_tile[(ty * TM + i) * BK + kk]\n',
    ),
    (
        '                b_frag[j] = b_tile[kk * BN + tx + j * THREAD_COLS]\n',
        '                b_frag[j] = b_tile[kk * BN + tx * TN + j]\n',
    ),
    (
        '        row = row0 + ty + i * THREAD_ROWS\n',
        '        row = row0 + ty * TM + i\n',
    ),
    (
        '                col = col0 + tx + j * THREAD_COLS\n',
        '                col = col0 + tx * TN + j\n',
    ),
]
