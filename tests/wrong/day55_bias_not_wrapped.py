"""Day 55, deliberately wrong: day55_fused_bias_gelu.py with one classic mistake.

MISTAKE: a quad's columns taken as c0, c0 + 1, c0 + 2, c0 + 3 with no wrap: when cols % 4 != 0 a quad
         that crosses a row's end reads past the bias (the simulator names the index; on the GPU
         it adds whatever lies after it) instead of the next row's first biases.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day55_fused_bias_gelu"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "            c1 = c0 + 1 if c0 + 1 < cols else c0 + 1 - cols\n"
        "            c2 = c1 + 1 if c1 + 1 < cols else c1 + 1 - cols\n"
        "            c3 = c2 + 1 if c2 + 1 < cols else c2 + 1 - cols\n",
        "            c1 = c0 + 1  # MISTAKE: no wrap past the row's end\n"
        "            c2 = c0 + 2\n"
        "            c3 = c0 + 3\n",
    ),
]
