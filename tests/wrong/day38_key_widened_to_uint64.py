"""Day 38, deliberately wrong: day38_checkpoint_topk.py with one classic mistake.

MISTAKE: the keys are returned as Numba types them, ~x and x | SIGN of a uint32 widened to uint64: in
         the simulator (NumPy keeps uint32) every result is right, on the GPU a key compared against a
         uint32 threshold is above it whatever its low 32 bits say.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day38_checkpoint_topk"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "        return uint32(~bits)  # Numba types ~uint32 and uint32 | uint32 as uint64: cast back\n",
        "        return ~bits  # MISTAKE: a uint64 on the GPU\n",
    ),
    (
        "    return uint32(bits | uint32(SIGN))\n",
        "    return bits | uint32(SIGN)\n",
    ),
    (
        "    return uint32(~float_to_ordered_uint32(bits))\n",
        "    return ~float_to_ordered_uint32(bits)\n",
    ),
]
