"""Day 07, deliberately wrong: day07_constant_mask.py with one classic mistake.

MISTAKE: halo off by one: the optimized kernel's edge guard is 0 < k, so the tap that reads x[0] is dropped and the
         first MASK_RADIUS + 1 outputs come out wrong.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day07_constant_mask"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        ('    bank = cuda.const.array_like(FILTER_BANK)  # (NUM_FILTERS, MASK_WIDTH)\n'
         '    n = x.size\n'
         '    i = cuda.grid(1)\n'
         '    if i < n:\n'
         '        acc = float32(0)\n'
         '        for j in range(MASK_WIDTH):\n'
         '            k = i + j - MASK_RADIUS\n'
         '            if 0 <= k < n:\n'),
        ('    bank = cuda.const.array_like(FILTER_BANK)  # (NUM_FILTERS, MASK_WIDTH)\n'
         '    n = x.size\n'
         '    i = cuda.grid(1)\n'
         '    if i < n:\n'
         '        acc = float32(0)\n'
         '        for j in range(MASK_WIDTH):\n'
         '            k = i + j - MASK_RADIUS\n'
         '            if 0 < k < n:  # MISTAKE: drops x[0]\n'),
    ),
]
