"""Day 12, deliberately wrong: day12_local_memory_spills.py with one classic mistake.

MISTAKE: the "optimized" kernel keeps the six shared values in a local array and orders them with a run-time index
         (selection sort): still correct, but the array spills to local memory.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day12_local_memory_spills"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        ('    a0, a5 = _cx(a0, a5)\n'
         '    a1, a3 = _cx(a1, a3)\n'
         '    a2, a4 = _cx(a2, a4)\n'
         '    a1, a2 = _cx(a1, a2)\n'
         '    a3, a4 = _cx(a3, a4)\n'
         '    a0, a3 = _cx(a0, a3)\n'
         '    a2, a5 = _cx(a2, a5)\n'
         '    a1 = max(a0, a1)  # the smallest of the six is never needed again\n'
         '    a2, a3 = _cx(a2, a3)\n'
         '    a4 = min(a4, a5)  # nor the largest\n'
         '    a1, a2 = _cx(a1, a2)\n'
         '    a3, a4 = _cx(a3, a4)\n'
         '    return a1, a2, a3, a4\n'),
        ('    win = cuda.local.array(6, float32)\n'
         '    win[0], win[1], win[2], win[3], win[4], win[5] = a0, a1, a2, a3, a4, a5\n'
         '    for a in range(5):\n'
         '        m = a\n'
         '        for k in range(a + 1, 6):\n'
         '            if win[k] < win[m]:\n'
         '                m = k\n'
         '        t = win[a]\n'
         '        win[a] = win[m]\n'
         '        win[m] = t\n'
         '    return win[1], win[2], win[3], win[4]\n'),
    ),
]
