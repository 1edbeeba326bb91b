"""Day 67, deliberately wrong: day67_flash_attention_tensor_cores.py with one classic mistake.

MISTAKE: the CUDA C's online softmax rescales the running sum l but not the output accumulators:
         earlier key tiles' P V stay at their own, smaller max and weigh too much once a later tile
         raises it. It builds like the right kernel; only the GPU tests (several key tiles) see it.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day67_flash_attention_tensor_cores"
GPU_ONLY = "the tensor-core kernel is CUDA C: only its gpu-marked tests (two or more key tiles) run it"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "            o[dn][2 * r2] *= alpha;      // the running output rescaled to the new max\n"
        "            o[dn][2 * r2 + 1] *= alpha;\n",
        "            // MISTAKE: o not rescaled\n",
    ),
]
