"""Day 52, deliberately wrong: day52_unified_memory.py with one classic mistake.

MISTAKE: the prefetches to the GPU are issued after the kernel instead of before it: the kernel still
         faults every page over, and the prefetch then moves pages that are already there.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day52_unified_memory"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    rt.memPrefetchAsync(address(mx), mx.nbytes, dev, STREAM)\n"
        "    rt.memPrefetchAsync(address(my), my.nbytes, dev, STREAM)\n"
        "    saxpy_kernel[_grid(x.size), THREADS](np.float32(a), mx, my, my)\n",
        "    saxpy_kernel[_grid(x.size), THREADS](np.float32(a), mx, my, my)\n"
        "    rt.memPrefetchAsync(address(mx), mx.nbytes, dev, STREAM)\n"
        "    rt.memPrefetchAsync(address(my), my.nbytes, dev, STREAM)\n",
    ),
]
