"""Day 73, written another way: day73_decode_attention.py with a correct variant.

RIGHT: thread hh takes head hh's maximum over the warps once and leaves it in shared memory behind a second barrier, instead
       of every output column recomputing it from the warps' maxima.

The grader run against it must pass (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day73_decode_attention"
EDITS = [  # (text in the solution, what the variant puts there)
    (
        '        sm_l = cuda.shared.array((NW, HG), float32)\n',
        '        sm_l = cuda.shared.array((NW, HG), float32)\n'
        '        sm_top = cuda.shared.array(HG, float32)\n',
    ),
    (
        '        cuda.syncthreads()\n'
        '        for i in range(tid, SMN, NW * WARP):\n'
        '            hh = i // HEAD_DIM\n'
        '            d = i % HEAD_DIM\n'
        '            m_all = sm_m[0, hh]\n'
        '            for w in range(1, NW):\n'
        '                m_all = max(m_all, sm_m[w, hh])\n',
        '        cuda.syncthreads()\n'
        '        if tid < HG:\n'
        '            m_top = sm_m[0, tid]\n'
        '            for w in range(1, NW):\n'
        '                m_top = max(m_top, sm_m[w, tid])\n'
        '            sm_top[tid] = m_top\n'
        '        cuda.syncthreads()  # every thread reads what threads 0..HG-1 wrote\n'
        '        for i in range(tid, SMN, NW * WARP):\n'
        '            hh = i // HEAD_DIM\n'
        '            d = i % HEAD_DIM\n'
        '            m_all = sm_top[hh]\n',
    ),
]
