"""Day 12, deliberately wrong: day12_local_memory_spills.py with one classic mistake.

MISTAKE: the "optimized" kernel keeps the window in a local array and selects the median with a run-time index (partial
         selection sort): still correct, but the array spills to local memory.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day12_local_memory_spills"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        ('    l0, m0, h0 = _sort3(v0, v1, v2)\n'
         '    l1, m1, h1 = _sort3(v3, v4, v5)\n'
         '    l2, m2, h2 = _sort3(v6, v7, v8)\n'
         '    lo = max(max(l0, l1), l2)\n'
         '    hi = min(min(h0, h1), h2)\n'
         '    _, mid, _ = _sort3(m0, m1, m2)\n'
         '    _, med, _ = _sort3(lo, mid, hi)\n'
         '    return med\n'),
        ('    win = cuda.local.array(WIDTH, float32)\n'
         '    win[0], win[1], win[2], win[3], win[4] = v0, v1, v2, v3, v4\n'
         '    win[5], win[6], win[7], win[8] = v5, v6, v7, v8\n'
         '    for a in range(RADIUS + 1):\n'
         '        m = a\n'
         '        for k in range(a + 1, WIDTH):\n'
         '            if win[k] < win[m]:\n'
         '                m = k\n'
         '        t = win[a]\n'
         '        win[a] = win[m]\n'
         '        win[m] = t\n'
         '    return win[RADIUS]\n'),
    ),
]
