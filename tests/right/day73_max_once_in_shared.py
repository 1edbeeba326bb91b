"""Day 73, written another way: day73_decode_attention.py with a correct variant.

RIGHT: thread 0 takes the maximum over the warps once and leaves it in shared memory behind a second barrier, instead
       of every output column recomputing it from the warps' maxima.

The grader run against it must pass (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day73_decode_attention"
EDITS = [  # (text in the solution, what the variant puts there)
    (
        '        sm_l = cuda.shared.array(NW, float32)\n',
        '        sm_l = cuda.shared.array(NW, float32)\n'
        '        sm_top = cuda.shared.array(1, float32)\n',
    ),
    (
        '        cuda.syncthreads()\n'
        '        for d in range(tid, HEAD_DIM, NW * WARP):\n'
        '            m_all = sm_m[0]\n'
        '            for w in range(1, NW):\n'
        '                m_all = max(m_all, sm_m[w])\n',
        '        cuda.syncthreads()\n'
        '        if tid == 0:\n'
        '            m_top = sm_m[0]\n'
        '            for w in range(1, NW):\n'
        '                m_top = max(m_top, sm_m[w])\n'
        '            sm_top[0] = m_top\n'
        '        cuda.syncthreads()  # every thread reads what thread 0 wrote\n'
        '        for d in range(tid, HEAD_DIM, NW * WARP):\n'
        '            m_all = sm_top[0]\n',
    ),
]
