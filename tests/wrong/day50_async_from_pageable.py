"""Day 50, deliberately wrong: day50_streams_overlap.py with one classic mistake.

MISTAKE: the overlapped version issues its async copies from the caller's pageable array and into a
         pageable result. The driver stages pageable copies through its own buffer with the CPU and
         returns only when each is done, so on a GPU the streams never overlap a copy with anything:
         correct results, the naive version's time.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day50_streams_overlap"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "    result = cuda.pinned_array(x.shape, np.float32)  # locked from birth: downloads DMA straight in\n",
        "    result = np.empty_like(x)\n",
    ),
    (
        "    with cuda.pinned(x):\n",
        "    with contextlib.nullcontext():\n",
    ),
]
