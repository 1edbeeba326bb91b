"""Day 50, deliberately wrong: day50_streams_overlap.py with one classic mistake.

MISTAKE: each chunk's download is issued on the next stream, not on the stream of its kernel, so
         nothing orders it after the kernel: on a GPU it can copy the chunk back before (or while)
         the kernel writes it. The simulator runs streams in issue order and would not notice the
         race; the grader checks which stream every step of a chunk went to.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day50_streams_overlap"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "        d_out[lo:hi].copy_to_host(out[lo:hi], stream=s)  # D2H copy engine: runs during the next uploads\n",
        "        d_out[lo:hi].copy_to_host(out[lo:hi], stream=streams[(k + 1) % len(streams)])\n",
    ),
]
