"""Day 17, written another way: day17_warp_shuffles.py with a correct variant.

RIGHT: one set of warp slots and a second barrier after warp 0 has read them (the lesson's other way to keep a fast
       warp from overwriting a slot before it is read), instead of two sets alternated by row.

The grader run against it must pass (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day17_warp_shuffles"
EDITS = [  # (text in the solution, what the variant puts there)
    (
        '    warp_sums = cuda.shared.array((2, WARPS), float32)\n',
        '    warp_sums = cuda.shared.array(WARPS, float32)\n',
    ),
    (
        '            warp_sums[slot, warp] = v\n',
        '            warp_sums[warp] = v\n',
    ),
    (
        '            v = warp_sums[slot, lane] if lane < WARPS else float32(0.0)\n',
        '            v = warp_sums[lane] if lane < WARPS else float32(0.0)\n',
    ),
    (
        '        slot = 1 - slot\n',
        '        cuda.syncthreads()  # warp 0 has read every slot: the next row may overwrite them\n',
    ),
]
