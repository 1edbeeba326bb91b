"""Day 27, a correct variant: day27_scan_kogge_stone.py written another way.

RIGHT: Kogge-Stone in a single buffer with two barriers a step: each thread reads its operands into a register,
       a barrier, then writes; a second barrier before the next step reads. Half the shared memory, twice the
       barriers: the same memory space and the same idea, so the grader must accept it.

The grader run against it must pass (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day27_scan_kogge_stone"
EDITS = [  # (text in the solution, what the variant puts there)
    (
'        dst = THREADS - src  # the other half: this step writes nothing that this step reads\n        if t >= d:\n            # Lanes read buf[src + t] and buf[src + t - d]: 32 consecutive words each, one\n            # wavefront a request (no bank conflicts at any d).\n            buf[dst + t] = buf[src + t] + buf[src + t - d]\n        else:\n            buf[dst + t] = buf[src + t]  # the prefix is complete: carry it to the other half\n        cuda.syncthreads()  # the next step reads what other threads wrote in this one\n        src = dst\n',
'        # RIGHT: one buffer; every read of the step lands in a register before any write\n        v = buf[t]\n        if t >= d:\n            v += buf[t - d]\n        cuda.syncthreads()  # all reads of this step are done: the words may be rewritten\n        buf[t] = v\n        cuda.syncthreads()  # all writes are done: the next step may read them\n',
    ),
]
