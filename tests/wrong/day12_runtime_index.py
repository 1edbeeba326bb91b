"""Day 12, deliberately wrong: day12_local_memory_spills.py with one classic mistake.

MISTAKE: the "optimized" kernel keeps the window in a local array and selects the median with a run-time index (partial
         selection sort): still correct, but the array spills to local memory.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day12_local_memory_spills"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        ('        # Nine named values, not an array: every one has a fixed register. Neighbouring threads\n'
         '        # read overlapping windows, so eight of the nine loads hit L1.\n'
         '        v0 = x[min(max(i - 4, 0), last)]\n'
         '        v1 = x[min(max(i - 3, 0), last)]\n'
         '        v2 = x[min(max(i - 2, 0), last)]\n'
         '        v3 = x[min(max(i - 1, 0), last)]\n'
         '        v4 = x[min(i, last)]\n'
         '        v5 = x[min(i + 1, last)]\n'
         '        v6 = x[min(i + 2, last)]\n'
         '        v7 = x[min(i + 3, last)]\n'
         '        v8 = x[min(i + 4, last)]\n'
         '        # Median of nine = median of (largest of the row minima, median of the row medians,\n'
         '        # smallest of the row maxima) once each row of three is sorted.\n'
         '        l0, m0, h0 = _sort3(v0, v1, v2)\n'
         '        l1, m1, h1 = _sort3(v3, v4, v5)\n'
         '        l2, m2, h2 = _sort3(v6, v7, v8)\n'
         '        lo = max(max(l0, l1), l2)\n'
         '        hi = min(min(h0, h1), h2)\n'
         '        _, mid, _ = _sort3(m0, m1, m2)\n'
         '        _, med, _ = _sort3(lo, mid, hi)\n'),
        ('        win = cuda.local.array(WIDTH, float32)\n'
         '        for k in range(WIDTH):\n'
         '            win[k] = x[min(max(i + k - RADIUS, 0), last)]\n'
         '        for a in range(RADIUS + 1):\n'
         '            m = a\n'
         '            for k in range(a + 1, WIDTH):\n'
         '                if win[k] < win[m]:\n'
         '                    m = k\n'
         '            t = win[a]\n'
         '            win[a] = win[m]\n'
         '            win[m] = t\n'
         '        med = win[RADIUS]\n'),
    ),
]
