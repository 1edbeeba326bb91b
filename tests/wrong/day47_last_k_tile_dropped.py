"""Day 47, deliberately wrong: day47_matmul_tensor_cores.py with one classic mistake.

MISTAKE: the tensor-core k loop counts whole 32-deep tiles only (K / 32, rounded down): the last,
         partial tile is never loaded or multiplied, so every output misses its last K % 32 terms (and
         K < 32 gives all zeros). Right at 4096^3; caught only on a GPU (K = 37, 1021, ...): the
         simulator cannot run this kernel.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day47_matmul_tensor_cores"
GPU_ONLY = "the tensor-core kernel is CUDA C: only its gpu-marked tests (K = 37, 1021) run it"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '    const int ktiles = (K + BK - 1) / BK;  // the last tile partial: its chunks past K are zero-filled\n',
        '    const int ktiles = K / BK;  // MISTAKE: the partial last tile dropped\n',
    ),
]
