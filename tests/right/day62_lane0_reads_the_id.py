"""Day 62, a correct variant: day62_embedding_gather.py written another way.

RIGHT: lane 0 alone loads each id and hands it to the warp with a shuffle (cuda.shfl_sync from lane 0),
       instead of every lane loading the same address (a broadcast): still one request an id, one
       register move more. The grader asserts the ids are read once a row, not how.

CI requires every test of the day to pass against it. COURSE_TARGET=<this file> grades the solution
with these edits applied (course.days.load_target).
"""

SOLUTION = "day62_embedding_gather"
EDITS = [  # (text in the solution, what the variant puts there)
    (
        "    a = ids[t0]\n",
        "    lead = cuda.threadIdx.x % WARP == 0\n"
        "    a = cuda.shfl_sync(0xFFFFFFFF, ids[t0] if lead else 0, 0)  # lane 0 loads, the warp receives\n",
    ),
    (
        "        b = ids[t0 + 1]\n",
        "        b = cuda.shfl_sync(0xFFFFFFFF, ids[t0 + 1] if lead else 0, 0)\n",
    ),
]
