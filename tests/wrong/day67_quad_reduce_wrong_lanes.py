"""Day 67, deliberately wrong: day67_flash_attention_tensor_cores.py with one classic mistake.

MISTAKE: the row max reduced with xor shuffles over lane masks 4 and 8 instead of 1 and 2, in both
         kernels: in the mma layout a row's 64 scores sit in the 4 lanes of one quad (lane 4 g + t),
         so masks 4 and 8 mix rows g, g ^ 1, g ^ 2 and g ^ 3 and leave the quad's own lanes apart:
         the 4 lanes of a row subtract 4 different maxima and their p's no longer share a scale. The
         simulator sees wrong rows; the nvcc test sees lane masks 4 and 8 in the PTX.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day67_flash_attention_tensor_cores"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "                    mx = max(mx, cuda.shfl_xor_sync(FULL_MASK, mx, 1))  # the quad: lanes 4g .. 4g + 3\n"
        "                    mx = max(mx, cuda.shfl_xor_sync(FULL_MASK, mx, 2))\n",
        "                    mx = max(mx, cuda.shfl_xor_sync(FULL_MASK, mx, 4))  # MISTAKE: across quads\n"
        "                    mx = max(mx, cuda.shfl_xor_sync(FULL_MASK, mx, 8))\n",
    ),
    (
        "    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));\n"
        "    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));\n",
        "    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 4));  // MISTAKE: across quads\n"
        "    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 8));\n",
    ),
]
